#!/usr/bin/env python3
"""Writes bench/workloads/json_extraction.jsonl: ten short texts written for this project, each
asked for four fields as JSON, once with a json_schema response_format (extract_json) and once
without (extract_free), interleaved. Run from anywhere: python3 bench/workloads/make_json_extraction.py"""
import os
import json
person = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}, "age": {"type": "integer"},
          "city": {"type": "string", "maxLength": 40}, "job": {"type": "string", "maxLength": 40}},
          "required": ["name", "age", "city", "job"]}
order = {"type": "object", "properties": {"order_id": {"type": "string", "maxLength": 20},
         "product": {"type": "string", "maxLength": 40}, "quantity": {"type": "integer"},
         "total": {"type": "number"}}, "required": ["order_id", "product", "quantity", "total"]}
event = {"type": "object", "properties": {"title": {"type": "string", "maxLength": 60},
         "date": {"type": "string", "maxLength": 20}, "venue": {"type": "string", "maxLength": 60},
         "price": {"type": "number"}}, "required": ["title", "date", "venue", "price"]}
book = {"type": "object", "properties": {"title": {"type": "string", "maxLength": 60},
        "author": {"type": "string", "maxLength": 40}, "year": {"type": "integer"}, "pages": {"type": "integer"}},
        "required": ["title", "author", "year", "pages"]}
flight = {"type": "object", "properties": {"flight": {"type": "string", "maxLength": 10},
          "from": {"type": "string", "maxLength": 40}, "to": {"type": "string", "maxLength": 40},
          "departure": {"type": "string", "maxLength": 10}}, "required": ["flight", "from", "to", "departure"]}
items = [
 (person, "name, age, city and job of the person", "Maria Lopez is a 34-year-old architect who lives in Valencia. She designs public libraries and cycles to work every morning."),
 (person, "name, age, city and job of the person", "Tomasz Nowak, 52, has worked as a bus driver in Krakow for twenty years. On weekends he repairs old radios."),
 (order, "order id, product, quantity and total price of the order", "Order A-10442 was placed on Monday: 3 ceramic teapots for a total of 87.50 euros, shipped to Lyon by express mail."),
 (order, "order id, product, quantity and total price of the order", "Your order QX-7781 is confirmed. You bought 12 packs of graph paper, and the total charged to your card is 30.24 dollars."),
 (event, "title, date, venue and ticket price of the event", "The Harbor Jazz Night takes place on 2026-07-18 at the Old Customs House. Tickets cost 25 euros at the door."),
 (event, "title, date, venue and ticket price of the event", "Join us for Robotics Day on 2026-03-09 in the Science Museum hall. Entry is 8.5 pounds for adults and free for children."),
 (book, "title, author, publication year and page count of the book", "The Salt Road, a novel by Amina Diallo published in 2019, follows three traders across the Sahara in 412 pages."),
 (book, "title, author, publication year and page count of the book", "In 2004 Henrik Lund released Cold Light Harbor, a 288-page mystery set on a Norwegian island."),
 (flight, "flight number, origin city, destination city and departure time of the flight", "Flight LH 1423 leaves Frankfurt at 07:45 and lands in Athens three hours later. Boarding closes 20 minutes before departure."),
 (flight, "flight number, origin city, destination city and departure time of the flight", "Passengers on IB3170 from Madrid to Lisbon: departure is now scheduled for 18:20 from gate B12."),
]
lines = []
# Interleaved (json, free, json, free, ...): load drifting during a pass hits both alike.
for schema, fields, text in items:
    for category, with_format in (("extract_json", True), ("extract_free", False)):
        line = {"category": category,
                "messages": [{"role": "system", "content": "You copy facts from texts into JSON."},
                             {"role": "user", "content": f"Give the {fields} in this text as a JSON object with the keys "
                                                        f"{', '.join(schema['properties'])}.\n\nText: {text}"}],
                "max_tokens": 96}
        if with_format:
            line["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "fields", "strict": True, "schema": schema}}
        lines.append(json.dumps(line))
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "json_extraction.jsonl"), "w").write("\n".join(lines) + "\n")
