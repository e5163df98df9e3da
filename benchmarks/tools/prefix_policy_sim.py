#!/usr/bin/env python3
"""Design study for Granary's prefix-aware eviction: replays a Mooncake FAST'25 trace (one cached
object per full 512-token block, prefix semantics) against block caches of a given capacity and
prints the prefix hit rate and holes of several eviction policies next to the offline bound.

The replay model (one request: count the cached prefix run, then touch every cached block of the
request and insert the missing ones) follows ../shared/tools/prefix_cache_sim.py, written for this
project, so that the figures compare with its README; the policies below are new.

Policies (all leaf-first ones never evict a block whose child is cached, so they cannot make holes):
  lru            oldest touch first (what exact oldest-lease-first amounts to); may make holes
  leaf-lru       prefix-aware: oldest touch first among blocks with no cached child
  leaf-lfuda     leaf-first LFU with dynamic aging: key = L + hits, L = key of the last victim
  leaf-boost     leaf-first recency with a frequency credit: key = last touch + a * T * min(hits-1, 3),
                 T = running mean age of victims (scale free), a = 0.5
  leaf-table     leaf-first, evicts the leaf with the lowest P(reuse | hits, depth, age), the
                 probabilities measured on the whole trace beforehand: a ceiling for any online
                 policy that ranks blocks by these features (it learns from the future in aggregate)
  whether        leaf-first LRU that knows, per block, whether it will ever be used again (not when)
  bound          Belady's MIN with bypass on blocks: block hits, an upper bound on the prefix hits
                 of any policy with this capacity
Usage: prefix_policy_sim.py TRACE.jsonl [fractions, default 0.1,0.25,0.5] [policies]
"""
import bisect
import collections
import heapq
import json
import sys


def load(path):
    """The full 512-token blocks of every request (engines never store the partial last one)."""
    out = []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            out.append(r["hash_ids"][: r["input_length"] // 512])
    return out


def parents_and_depths(reqs):
    parent, depth = {}, {}
    for r in reqs:
        prev = None
        for i, b in enumerate(r):
            parent.setdefault(b, prev)
            depth.setdefault(b, i)
            prev = b
    return parent, depth


class LRU:
    def __init__(self, cap):
        self.cap, self.d = cap, collections.OrderedDict()

    def __contains__(self, b):
        return b in self.d

    def touch(self, b, t):
        self.d.move_to_end(b)

    def insert(self, b, t):
        while len(self.d) >= self.cap:
            self.d.popitem(last=False)
        self.d[b] = None


class LeafFirst:
    """Leaf-first eviction by a static key (recomputed on every touch): a heap of leaves, lazily cleaned."""

    def __init__(self, cap, parent, key):
        self.cap, self.parent, self.keyfn = cap, parent, key
        self.key, self.hits, self.last = {}, {}, {}
        self.kids = collections.defaultdict(int)
        self.heap = []
        self.level = 0.0      # LFUDA's L
        self.victim_age = 0.0  # running mean age of victims

    def __contains__(self, b):
        return b in self.key

    def _rekey(self, b, t):
        k = self.keyfn(self, b, t)
        self.key[b] = k
        if self.kids[b] == 0:
            heapq.heappush(self.heap, (k, b))

    def touch(self, b, t):
        self.hits[b] += 1
        self.last[b] = t
        self._rekey(b, t)

    def _evict_one(self, t):
        while True:
            k, v = heapq.heappop(self.heap)
            if v in self.key and self.key[v] == k and self.kids[v] == 0:
                break
        self.level = max(self.level, k[0] if isinstance(k, tuple) else k)
        age = t - self.last[v]
        self.victim_age = age if self.victim_age == 0 else 0.99 * self.victim_age + 0.01 * age
        del self.key[v], self.hits[v], self.last[v]
        p = self.parent.get(v)
        if p is not None and p in self.key:
            self.kids[p] -= 1
            if self.kids[p] == 0:
                heapq.heappush(self.heap, (self.key[p], p))

    def insert(self, b, t):
        p = self.parent.get(b)
        if p is not None and p in self.key:
            self.kids[p] += 1  # before evicting: the parent of the newcomer is no longer a leaf
        while len(self.key) >= self.cap:
            self._evict_one(t)
        self.hits[b] = 1
        self.last[b] = t
        self._rekey(b, t)


def leaf_lru(cap, parent, **_):
    return LeafFirst(cap, parent, lambda s, b, t: t)


def leaf_lfuda(cap, parent, **_):
    return LeafFirst(cap, parent, lambda s, b, t: (s.level + s.hits[b], t))


def leaf_boost(cap, parent, a=0.5, **_):
    return LeafFirst(cap, parent, lambda s, b, t: t + a * s.victim_age * min(s.hits[b] - 1, 3))


def leaf_whether(cap, parent, reqs, **_):
    used_later = []
    seen = set()
    for r in reversed(reqs):
        used_later.append({b: b in seen for b in r})
        seen.update(r)
    used_later.reverse()
    return LeafFirst(cap, parent, lambda s, b, t: t + (1 << 40 if used_later[t][b] else 0))


class LeafTable:
    """Leaf-first; leaves kept per class in age order, the victim is the class head with the lowest score."""

    def __init__(self, cap, parent, cls, score):
        self.cap, self.parent, self.cls, self.score = cap, parent, cls, score
        self.last, self.hits = {}, {}
        self.kids = collections.defaultdict(int)
        self.heaps = collections.defaultdict(list)

    def __contains__(self, b):
        return b in self.last

    def _push(self, b):
        if self.kids[b] == 0:
            heapq.heappush(self.heaps[self.cls(self.hits[b], b)], (self.last[b], b))

    def _head(self, c):
        h = self.heaps[c]
        while h:
            t, v = h[0]
            if v in self.last and self.last[v] == t and self.kids[v] == 0 and self.cls(self.hits[v], v) == c:
                return h[0]
            heapq.heappop(h)
        return None

    def touch(self, b, t):
        self.last[b] = t
        self.hits[b] += 1
        self._push(b)

    def insert(self, b, t):
        p = self.parent.get(b)
        if p is not None and p in self.last:
            self.kids[p] += 1
        while len(self.last) >= self.cap:
            best = None
            for c in list(self.heaps):
                head = self._head(c)
                if head is not None:
                    s = self.score(c, t - head[0])
                    if best is None or s < best[0]:
                        best = (s, c)
            _, v = heapq.heappop(self.heaps[best[1]])
            del self.last[v], self.hits[v]
            pv = self.parent.get(v)
            if pv is not None and pv in self.last:
                self.kids[pv] -= 1
                self._push(pv)
        self.last[b] = t
        self.hits[b] = 1
        self._push(b)


def leaf_table(cap, parent, reqs, depth, **_):
    def cls(hits, b):
        d = depth[b]
        return (min(hits, 5), 0 if d < 4 else 1 if d < 8 else 2 if d < 16 else 3 if d < 32 else 4)

    # P(the block is used again | class, not used again within `age` requests), from the whole trace.
    gaps = collections.defaultdict(list)
    last, hits = {}, collections.Counter()
    for t, r in enumerate(reqs):
        for b in set(r):
            if b in last:
                gaps[cls(hits[b], b)].append(t - last[b])
            hits[b] += 1
            last[b] = t
    never = collections.Counter(cls(hits[b], b) for b in last)
    step, table = 50, {}
    for c, g in gaps.items():
        g.sort()
        row = []
        for a in range(0, 10000, step):
            again = len(g) - bisect.bisect_right(g, a)
            row.append(again / (again + never[c]) if again + never[c] else 0.0)
        table[c] = row
    return LeafTable(cap, parent, cls, lambda c, a: table[c][min(a // step, len(table[c]) - 1)] if c in table else 0.0)


def run(reqs, cache):
    """Prefix hit rate (hit blocks / stored prompt blocks) and holes (cached blocks behind the first miss)."""
    hit = total = holes = 0
    for t, r in enumerate(reqs):
        n = 0
        while n < len(r) and r[n] in cache:
            n += 1
        hit += n
        total += len(r)
        holes += sum(1 for b in r[n:] if b in cache)
        for b in r:
            if b in cache:
                cache.touch(b, t)
            else:
                cache.insert(b, t)
    return hit / total, holes


def belady_bound(reqs, cap):
    """Block hits of Belady's MIN with bypass (optimal for unit-size blocks): an upper bound on prefix hits."""
    uses = collections.defaultdict(collections.deque)
    for t, r in enumerate(reqs):
        for b in r:
            if not uses[b] or uses[b][-1] != t:
                uses[b].append(t)
    inf = float("inf")

    def next_use(b, t):
        q = uses[b]
        while q and q[0] <= t:
            q.popleft()
        return q[0] if q else inf

    resident, heap, hits, total = {}, [], 0, 0
    for t, r in enumerate(reqs):
        for b in r:
            total += 1
            if b in resident:
                hits += 1
            elif len(resident) < cap:
                resident[b] = None
            else:
                while True:
                    n, v = heap[0]
                    if v in resident and resident[v] == -n:
                        break
                    heapq.heappop(heap)
                if next_use(b, t) >= -heap[0][0]:
                    continue  # bypass: the newcomer is needed last
                heapq.heappop(heap)
                del resident[v]
                resident[b] = None
            resident[b] = next_use(b, t)
            heapq.heappush(heap, (-resident[b], b))
    return hits / total


POLICIES = {
    "lru": lambda cap, parent, **_: LRU(cap),
    "leaf-lru": leaf_lru,
    "leaf-lfuda": leaf_lfuda,
    "leaf-boost": leaf_boost,
    "leaf-table": leaf_table,
    "whether": leaf_whether,
}

if __name__ == "__main__":
    reqs = load(sys.argv[1])
    fractions = [float(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "0.1,0.25,0.5").split(",")]
    names = sys.argv[3].split(",") if len(sys.argv) > 3 else list(POLICIES) + ["bound"]
    parent, depth = parents_and_depths(reqs)
    unique = len(parent)
    refs = sum(len(r) for r in reqs)
    print(f"{sys.argv[1].split('/')[-1]}: {len(reqs)} requests, {unique} unique blocks, {refs} block references, "
          f"most reuse possible {1 - unique / refs:.4f}")
    for fraction in fractions:
        cap = int(unique * fraction)
        cells = []
        for name in names:
            if name == "bound":
                cells.append(f"bound {belady_bound(reqs, cap):.4f}")
            else:
                h, holes = run(reqs, POLICIES[name](cap, parent, reqs=reqs, depth=depth))
                cells.append(f"{name} {h:.4f} ({holes} holes)")
        print(f"pool {fraction:.0%} ({cap} blocks) | " + " | ".join(cells), flush=True)
