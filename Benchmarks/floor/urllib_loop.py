"""A plain Python paging loop, for paging-bench row 13: urllib (standard library only) fetching
BASE/repos?page=1..PAGES&per_page=100, each page parsed with json and its items counted.
Usage: python3 urllib_loop.py BASE PAGES."""
import json
import sys
import urllib.request

base, pages = sys.argv[1], int(sys.argv[2])
items = 0
for page in range(1, pages + 1):
    with urllib.request.urlopen(f"{base}/repos?page={page}&per_page=100") as response:
        items += len(json.load(response)["items"])
assert items == pages * 100, items
print(items)
