# A Python workload for carve record: objects of many sizes, kept live and
# churned. Run with PYTHONMALLOC=malloc so every object goes to malloc.
import json
import random

random.seed(19)

# A table of records, as a program's in-memory state.
records = {}
for i in range(60000):
    records["user%06d" % i] = {
        "id": i,
        "name": "name-%d" % (i * 7919 % 100003),
        "tags": [random.choice("abcdefgh") * random.randint(1, 12) for _ in range(random.randint(0, 4))],
        "score": random.random(),
    }

# Churn: replace a third of the records, drop a fifth.
keys = list(records)
for k in random.sample(keys, len(keys) // 3):
    r = records[k]
    r["name"] = r["name"].upper() + "-v2"
    r["tags"] = r["tags"] + ["x" * random.randint(1, 40)]
for k in random.sample(keys, len(keys) // 5):
    del records[k]

# Serialize and parse back: large strings and a second copy of the state.
text = json.dumps(records)
copy = json.loads(text)
del text

# Sort and group.
byscore = sorted(copy.values(), key=lambda r: r["score"])
groups = {}
for r in byscore:
    groups.setdefault(len(r["tags"]), []).append(r["id"])
print(len(records), len(copy), {k: len(v) for k, v in sorted(groups.items())})
