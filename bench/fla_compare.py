"""Pairs linea's GPU kernel timings with fla's from the same device call and prints the ratios.

Reads JSON lines of bench_gpu_delta_rule and bench_gpu_gla (linea) and of bench/fla_delta_rule.py
and bench/fla_gla_family.py (fla), matches them by op, head shape and T, and prints one JSON line
per pair: linea's forward, forward+backward and (where the op saves) forward+backward from the
saved intermediates, fla's forward and forward+backward, and fla / linea for each (above 1: linea
is faster). Lines that are not timings (device headers, errors) and unpaired timings are listed on
stderr, so a missing half is never silent.
usage: fla_compare.py LINEA.jsonl[,LINEA2.jsonl...] FLA.jsonl[,FLA2.jsonl...]
"""
import json
import sys


def read(paths):
    rows = []
    for path in paths.split(','):
        with open(path, encoding='utf-8') as f:
            for number, line in enumerate(f, 1):
                line = line.strip()
                if not line.startswith('{'):
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as error:
                    print(f'{path}:{number}: not JSON ({error})', file=sys.stderr)
                    continue
                if 'error' in row:
                    print(f'{path}:{number}: {row.get("op")} failed: {row["error"]}', file=sys.stderr)
                rows.append(row)
    return rows


def key(row):
    """(op, shape, T) of a timing row; None for rows that hold no timing."""
    if 'fwd_bwd_ms' not in row or row.get('fwd_bwd_ms') is None:
        return None
    op = row['op'].removeprefix('delta_rule_')
    # bench_gpu_gla and fla_gla_family time one head shape (H = 16, K = V = 128): the anchors'.
    return op, row.get('shape', 'anchors'), row['T']


def ratio(reference, ours):
    return round(reference / ours, 3) if reference and ours else None


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    linea = {key(r): r for r in read(sys.argv[1]) if key(r)}
    fla = {key(r): r for r in read(sys.argv[2]) if key(r)}
    for k in sorted(linea.keys() & fla.keys()):
        ours, theirs = linea[k], fla[k]
        saved = ours.get('fwd_bwd_saved_ms')
        print(json.dumps({
            'op': k[0], 'shape': k[1], 'T': k[2],
            'linea_fwd_ms': round(ours['fwd_ms'], 4), 'linea_fwd_bwd_ms': round(ours['fwd_bwd_ms'], 4),
            'linea_fwd_bwd_saved_ms': round(saved, 4) if saved else None,
            'fla_fwd_ms': theirs['fwd_ms'], 'fla_fwd_bwd_ms': theirs['fwd_bwd_ms'],
            'fwd_ratio': ratio(theirs['fwd_ms'], ours['fwd_ms']),
            'fwd_bwd_ratio': ratio(theirs['fwd_bwd_ms'], ours['fwd_bwd_ms']),
            'fwd_bwd_saved_ratio': ratio(theirs['fwd_bwd_ms'], saved),
        }))
    for k in sorted(linea.keys() - fla.keys()):
        print(f'no fla timing for linea {k}', file=sys.stderr)
    for k in sorted(fla.keys() - linea.keys()):
        print(f'no linea timing for fla {k}', file=sys.stderr)


if __name__ == '__main__':
    main()
