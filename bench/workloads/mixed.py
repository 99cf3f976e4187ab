"""Mixed workload: classes and methods, builtins, json, re and sorting.

A small "inventory" program: it builds objects, serialises them to JSON and
back, scans text with regular expressions and sorts the results several ways.
Python calls, C calls (builtins, json, re) and interpreted work all matter.
Deterministic: a seeded random.Random drives all the data.
"""

import functools
import json
import random
import re


class Item:
    __slots__ = ("sku", "name", "price", "qty", "tags")

    def __init__(self, sku, name, price, qty, tags):
        self.sku = sku
        self.name = name
        self.price = price
        self.qty = qty
        self.tags = tags

    @property
    def value(self):
        return self.price * self.qty

    def to_dict(self):
        return {"sku": self.sku, "name": self.name, "price": self.price,
                "qty": self.qty, "tags": list(self.tags)}

    @classmethod
    def from_dict(cls, d):
        return cls(d["sku"], d["name"], d["price"], d["qty"], tuple(d["tags"]))

    def describe(self):
        return f"{self.sku} {self.name} x{self.qty} @ {self.price:.2f} [{','.join(self.tags)}]"


class PerishableItem(Item):
    __slots__ = ("days",)

    def __init__(self, sku, name, price, qty, tags, days):
        super().__init__(sku, name, price, qty, tags)
        self.days = days

    @property
    def value(self):
        return super().value * (0.5 if self.days < 3 else 1.0)

    def to_dict(self):
        d = super().to_dict()
        d["days"] = self.days
        return d

    @classmethod
    def from_dict(cls, d):
        return cls(d["sku"], d["name"], d["price"], d["qty"], tuple(d["tags"]), d["days"])


class Inventory:
    def __init__(self):
        self.items = []
        self.by_tag = {}

    def add(self, item):
        self.items.append(item)
        for tag in item.tags:
            self.by_tag.setdefault(tag, []).append(item)

    def total_value(self):
        return sum(item.value for item in self.items)

    def cheapest(self, k):
        return sorted(self.items, key=lambda it: (it.price, it.sku))[:k]

    def tag_report(self):
        return {tag: (len(items), max(it.qty for it in items))
                for tag, items in sorted(self.by_tag.items())}


WORDS = ["apple", "bolt", "cable", "drill", "eraser", "funnel", "gasket", "hinge",
         "insulator", "jack", "kettle", "ladder", "magnet", "nozzle", "oven", "pulley"]
TAGS = ["red", "blue", "green", "steel", "wood", "bulk", "sale", "new"]
SKU_RE = re.compile(r"([A-Z]{2})-(\d{4})")
PRICE_RE = re.compile(r"@ (\d+)\.(\d\d)")


def make_inventory(rng, n):
    inv = Inventory()
    for i in range(n):
        sku = "%s-%04d" % ("".join(rng.choice("ABCDEFGH") for _ in range(2)), i % 10000)
        name = " ".join(rng.sample(WORDS, 2))
        price = round(rng.uniform(0.5, 500.0), 2)
        qty = rng.randint(0, 200)
        tags = tuple(rng.sample(TAGS, rng.randint(1, 3)))
        if i % 5 == 0:
            item = PerishableItem(sku, name, price, qty, tags, rng.randint(0, 10))
        else:
            item = Item(sku, name, price, qty, tags)
        inv.add(item)
    return inv


def compare_items(a, b):
    if a.qty != b.qty:
        return b.qty - a.qty
    return (a.name > b.name) - (a.name < b.name)


def round_trip(inv):
    text = json.dumps([it.to_dict() for it in inv.items])
    data = json.loads(text)
    pretty = json.dumps(data[:200], indent=2, sort_keys=True)
    items = [PerishableItem.from_dict(d) if "days" in d else Item.from_dict(d) for d in data]
    return items, len(text) + len(pretty)


def scan(lines):
    prefixes = {}
    cents = 0
    for line in lines:
        m = SKU_RE.search(line)
        if m:
            prefixes[m.group(1)] = prefixes.get(m.group(1), 0) + 1
        for whole, frac in PRICE_RE.findall(line):
            cents += int(whole) * 100 + int(frac)
    masked = [SKU_RE.sub(lambda m: m.group(1) + "-****", line) for line in lines[:2000]]
    return prefixes, cents, sum(map(len, masked))


def main():
    rng = random.Random(1234)
    checksum = 0
    for _ in range(3):
        inv = make_inventory(rng, 5000)
        for _ in range(3):
            items, size = round_trip(inv)
            lines = [it.describe() for it in items]
            prefixes, cents, masked = scan(lines)
            ranked = sorted(items, key=functools.cmp_to_key(compare_items))
            by_value = sorted(items, key=lambda it: it.value, reverse=True)
            report = inv.tag_report()
            checksum += (size + cents + masked + len(prefixes) + len(report)
                         + len(inv.cheapest(50)) + int(inv.total_value())
                         + ranked[0].qty + int(by_value[0].value))
    print(checksum)


if __name__ == "__main__":
    main()
