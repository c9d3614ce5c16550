"""`splitspec serve` as a child process for the Python integration tests.

ServeProcess(binary, model, name, flags) writes a one-target cluster config in a
fresh run directory, starts `serve` with `flags`, waits for "cluster ready" (at
most 120 s; RuntimeError with serve's output otherwise) and gives an openai
client for it. stop() closes the client and ends serve with SIGTERM.
Attributes: dir (the run directory), port (HTTP), out_path (serve's output),
process, client.
"""
import os
import signal
import socket
import subprocess
import tempfile
import time

import openai


def read(path):
    with open(path) as f:
        return f.read()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServeProcess:
    def __init__(self, binary, model, name, flags, prefix="splitspec-serve-"):
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.port = free_port()
        config = os.path.join(self.dir, "cluster.toml")
        with open(config, "w") as f:
            f.write(f'[cluster]\nrun_dir = "{self.dir}"\n'
                    f'[coordinator]\ncontrol = "tcp://127.0.0.1:{free_port()}"\nhttp = "127.0.0.1:{self.port}"\n'
                    f'[models]\ntarget = "{model}"\n[[target_group]]\nname = "target"\nthreads = 1\n')
        self.out_path = os.path.join(self.dir, "serve.out")
        self.out = open(self.out_path, "w")
        self.process = subprocess.Popen([binary, "serve", "--config", config, "--served-model-name", name,
                                         "--heartbeat-ms", "100"] + flags,
                                        stdout=self.out, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while time.time() < deadline and self.process.poll() is None:
            if "cluster ready" in read(self.out_path):
                break
            time.sleep(0.1)
        if "cluster ready" not in read(self.out_path):
            self.stop()
            raise RuntimeError("serve did not start:\n" + read(self.out_path))
        self.client = openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key="unused",
                                    max_retries=0, timeout=300)

    def stop(self):
        if hasattr(self, "client"):
            self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)
        self.out.close()
