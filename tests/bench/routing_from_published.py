#!/usr/bin/env python3
"""A routing profile (spillway-routing-1) with a real model's published routing skew, for
`spillway-cli bench --draw-routing` and `--routing` on a random-weight model of the same shape.

The published figures are per-layer statistics of a measured per-expert count table: the hottest
expert's share of a layer's choices (median over layers), the normalized-entropy concentration
1 - H / ln(experts) (mean over layers) and how many experts cover 90 % of the choices (median).
Every layer gets the same shape: the shares of a log-normal (exp(sigma * z_i), z_i the normal
quantiles of the experts' ranks) capped at the published top share, the excess spread over the
others, with sigma chosen so that the concentration is the published one. The experts' order is
shuffled per layer (seeded), so each layer's hot experts are others. The fit's own statistics are
printed beside the published ones: it is a synthetic routing, stated as such in the profile's
source.

Usage: routing_from_published.py --layers 48 --experts 128 --used 8 --top-share 0.043 \
         --concentration 0.111 --coverage90 65 --source "..." -o profile.json
"""
import argparse
import json
import math
import random
from statistics import NormalDist


def capped_lognormal(experts, sigma, cap):
    shares = [math.exp(sigma * NormalDist().inv_cdf((i + 0.5) / experts)) for i in range(experts)]
    total = sum(shares)
    shares = [s / total for s in shares]
    for _ in range(500):
        excess = sum(max(0.0, s - cap) for s in shares)
        if excess < 1e-15:
            break
        shares = [min(s, cap) for s in shares]
        room = sum(s for s in shares if s < cap)
        shares = [s if s >= cap else s * (1 + excess / room) for s in shares]
    return sorted(shares, reverse=True)


def statistics(shares):
    experts = len(shares)
    entropy = -sum(s * math.log(s) for s in shares if s > 0)
    covered, k = 0.0, 0
    for s in sorted(shares, reverse=True):
        covered += s
        k += 1
        if covered >= 0.9 - 1e-12:
            break
    return 1 - entropy / math.log(experts), max(shares), k


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--layers", type=int, required=True)
    a.add_argument("--experts", type=int, required=True)
    a.add_argument("--used", type=int, required=True)
    a.add_argument("--tokens", type=int, default=100000, help="tokens the counts stand for")
    a.add_argument("--top-share", type=float, required=True, help="the hottest expert's share of a layer's choices")
    a.add_argument("--concentration", type=float, required=True, help="1 - normalized entropy")
    a.add_argument("--coverage90", type=int, help="published experts covering 90 %% (printed beside the fit's)")
    a.add_argument("--source", required=True, help="where the figures come from (kept in the profile)")
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("-o", "--out", required=True)
    o = a.parse_args()
    if not (1.0 / o.experts < o.top_share <= 1.0 and 0.0 < o.concentration < 1.0):
        a.error("--top-share must lie above 1/experts, --concentration in (0, 1)")
    if o.top_share * o.used > 1.0:
        a.error("an expert cannot be chosen by more than every token: --top-share x --used must be at most 1")

    lo, hi = 0.0, 8.0  # concentration grows with sigma
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        (lo, hi) = (mid, hi) if statistics(capped_lognormal(o.experts, mid, o.top_share))[0] < o.concentration else (lo, mid)
    sigma = 0.5 * (lo + hi)
    shares = capped_lognormal(o.experts, sigma, o.top_share)
    concentration, top, k90 = statistics(shares)
    if abs(concentration - o.concentration) > 1e-3:
        a.error(f"no capped log-normal reaches concentration {o.concentration} under a top share of {o.top_share}")

    choices = o.tokens * o.used
    # Largest remainders: each layer's counts add up to tokens x used exactly.
    raw = [s * choices for s in shares]
    counts = [math.floor(r) for r in raw]
    for i in sorted(range(o.experts), key=lambda i: raw[i] - counts[i], reverse=True)[: choices - sum(counts)]:
        counts[i] += 1
    rng = random.Random(o.seed)
    rows = []
    for _ in range(o.layers):
        order = list(range(o.experts))
        rng.shuffle(order)
        row = [0] * o.experts
        for rank, e in enumerate(order):
            row[e] = counts[rank]
        rows.append(row)
    fit = (f"capped log-normal fit (sigma {sigma:.3f}): top share {100 * top:.1f} %, concentration "
           f"{concentration:.3f}, {k90} of {o.experts} experts cover 90 %")
    profile = {
        "format": "spillway-routing-1",
        "source": f"synthetic, from published statistics: {o.source}; {fit}",
        "layers": o.layers,
        "experts": o.experts,
        "used": o.used,
        "tokens": o.tokens,
        "counts": rows,
    }
    with open(o.out, "w") as f:
        json.dump(profile, f)
    published = f", published {o.coverage90}" if o.coverage90 else ""
    print(f"{o.out}: {fit}{published}")


if __name__ == "__main__":
    main()
