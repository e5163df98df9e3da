#!/usr/bin/env python3
"""How well does what a store sees of a request predict whether its conversation continues?

Reads a Mooncake FAST'25 trace (JSON lines: timestamp, input_length, output_length, hash_ids; 512-token blocks) and
links every request to its parent: the earlier request that owns the deepest block it shares. A request counts as
continued when a later request shares all its blocks except possibly the last (a partial block hashes differently
once the answer is appended), and at least two. Prints, for every feature a store or an engine knows when it saves a
request's blocks, the ROC AUC of that feature for "continued" (0.5: no information; 1.0 or 0.0: a perfect
predictor). docs/benchmarks.md ("Prefix-aware eviction: choosing the policy") uses it on the conversation trace.

Usage: python3 benchmarks/tools/continuation_predictors.py TRACE.jsonl
"""
import json
import sys


def shared_prefix(a, b):
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def roc_auc(values, labels):
    """Probability that a continued request has a higher value than one that is not (ties count half)."""
    pairs = sorted((v, y) for v, y in zip(values, labels) if v is not None)
    positives = sum(y for _, y in pairs)
    negatives = len(pairs) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    rank_sum = 0.0
    i = 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        average_rank = (i + 1 + j) / 2.0
        rank_sum += average_rank * sum(y for _, y in pairs[i:j])
        i = j
    return (rank_sum - positives * (positives + 1) / 2.0) / (positives * negatives)


def main(path):
    with open(path) as f:
        requests = [json.loads(line) for line in f if line.strip()]
    owner = {}  # block -> the latest request that holds it
    continued = [0] * len(requests)
    turn = [1] * len(requests)
    gap = [None] * len(requests)
    for i, r in enumerate(requests):
        blocks = r["hash_ids"]
        parent = next((owner[b] for b in reversed(blocks) if b in owner), None)
        if parent is not None:
            parent_blocks = requests[parent]["hash_ids"]
            if shared_prefix(parent_blocks, blocks) >= max(2, len(parent_blocks) - 1):
                continued[parent] = 1
                turn[i] = turn[parent] + 1
                gap[i] = r["timestamp"] - requests[parent]["timestamp"]
        for b in blocks:
            owner[b] = i
    n = len(requests)
    print(f"{path}: {n} requests, {sum(continued)} continued ({100.0 * sum(continued) / n:.1f} %)")
    features = [
        ("turn number in its conversation", turn),
        ("time since the previous turn (first turns left out)", gap),
        ("input length (tokens)", [r["input_length"] for r in requests]),
        ("output length (tokens)", [r["output_length"] for r in requests]),
        ("blocks", [len(r["hash_ids"]) for r in requests]),
        ("output / input", [r["output_length"] / max(1, r["input_length"]) for r in requests]),
        ("arrival time", [r["timestamp"] for r in requests]),
    ]
    for name, values in features:
        print(f"  AUC {roc_auc(values, continued):.3f}  {name}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    main(sys.argv[1])
