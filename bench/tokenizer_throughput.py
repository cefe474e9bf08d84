#!/usr/bin/env python3
"""`linea prepare` against Hugging Face `tokenizers` (batch encode) and `tiktoken` (batch encode) on
the same text, the same tokenizer and the same number of cores; prints JSON lines.

  python3 bench/tokenizer_throughput.py --linea BUILD/linea --text gcide.dict.dz --threads 16 --work DIR

The text: the GCIDE dictionary (Debian's dict-gcide, the embedded corpus's source), its blank-line
paragraphs joined into documents of about 3000 characters, as one parquet file (pyarrow, snappy,
row groups of 1000 documents, as FineWeb-Edu's). The tokenizer: a byte-level BPE of --vocab ids
that `tokenizers` trains on the first --train-mb of the text, saved as tokenizer.json; its merges as
tiktoken ranks with the cl100k regex. linea's time is what `linea prepare` reports for reading,
tokenizing and writing shards (tokenizer loading excluded, as for the libraries); the libraries'
is their batch call alone, the documents already in memory. linea's shards are also compared id for
id with the libraries' output ([EOS, ids...] per document)."""
import argparse
import base64
import gzip
import json
import os
import re
import subprocess
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--linea", required=True)
parser.add_argument("--text", required=True)
parser.add_argument("--threads", type=int, default=os.cpu_count())
parser.add_argument("--work", required=True)
parser.add_argument("--max-mb", type=float, default=40)
parser.add_argument("--train-mb", type=float, default=4)
parser.add_argument("--vocab", type=int, default=16384)
args = parser.parse_args()
os.environ["RAYON_NUM_THREADS"] = str(args.threads)  # before tokenizers and tiktoken start their pools
os.makedirs(args.work, exist_ok=True)

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import tiktoken  # noqa: E402
import tokenizers  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402


def emit(record):
    print(json.dumps(record), flush=True)


# Documents.
with gzip.open(args.text, "rt", encoding="utf-8", errors="replace") as f:
    text = f.read(int(args.max_mb * 1e6))
docs, current = [], []
size = 0
for paragraph in text.split("\n\n"):
    current.append(paragraph)
    size += len(paragraph)
    if size >= 3000:
        docs.append("\n\n".join(current))
        current, size = [], 0
text_bytes = sum(len(d.encode()) for d in docs)
parquet = os.path.join(args.work, "bench.parquet")
pq.write_table(pa.table({"text": docs}), parquet, compression="SNAPPY", row_group_size=1000)

# The tokenizer.
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
sample, taken = [], 0
for d in docs:
    if taken > args.train_mb * 1e6:
        break
    sample.append(d)
    taken += len(d)
start = time.perf_counter()
tok.train_from_iterator(sample, trainers.BpeTrainer(
    vocab_size=args.vocab, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    show_progress=False))
train_s = time.perf_counter() - start
tokenizer_json = os.path.join(args.work, "tokenizer.json")
tok.save(tokenizer_json)
tok.encode_special_tokens = True
eos = tok.token_to_id("<|endoftext|>")
emit({"bench": "tokenizer_throughput_setup", "documents": len(docs), "text_mb": text_bytes / 1e6,
      "vocab": tok.get_vocab_size(), "train_s": train_s, "threads": args.threads, "cpus": os.cpu_count(),
      "tokenizers": tokenizers.__version__, "tiktoken": tiktoken.__version__})

# tiktoken ranks from the same merges.
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b)
        cs.append(256 + n)
        n += 1
u2b = {chr(c): b for b, c in zip(bs, cs)}
ranks = {bytes([b]): b for b in range(256)}
for m in json.loads(tok.to_str())["model"]["merges"]:
    a, b = m if isinstance(m, list) else m.split(" ")
    ranks.setdefault(bytes(u2b[c] for c in a + b), len(ranks))
ranks_file = os.path.join(args.work, "ranks.tiktoken")
with open(ranks_file, "w") as f:
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        f.write(f"{base64.b64encode(token).decode()} {rank}\n")
import tiktoken_ext.openai_public as public  # noqa: E402

public.load_tiktoken_bpe = lambda *a, **k: {}
enc = tiktoken.Encoding(name="bench", pat_str=public.cl100k_base()["pat_str"], mergeable_ranks=ranks,
                        special_tokens={"<|endoftext|>": len(ranks) + 1})


def run_linea(spec, name):
    out = os.path.join(args.work, "shards-" + name)
    subprocess.run(["rm", "-rf", out], check=True)
    result = subprocess.run([args.linea, "prepare", "--input", parquet, "--tokenizer", spec, "--output", out,
                             "--threads", str(args.threads), "--shard-tokens", "2000000000", "--quiet"],
                            check=True, capture_output=True, text=True)
    m = re.search(r"tokenized in ([0-9.]+) s", result.stdout)
    seconds = float(m.group(1))
    manifest = json.load(open(os.path.join(out, "manifest.json")))
    stream = []
    for shard in manifest["shards"]:
        raw = np.fromfile(os.path.join(out, shard["file"]), dtype=np.uint8)
        width = np.uint16 if int.from_bytes(raw[:4].tobytes(), "little") == 20240520 else np.uint32
        stream.append(raw[1024:].view(width))
    return seconds, np.concatenate(stream).astype(np.int64), manifest["eos_id"], result.stdout.strip()


def reference_stream(ids, eos_id):
    return np.concatenate([np.concatenate([[eos_id], np.asarray(x, dtype=np.int64)]) for x in ids])


for name, spec, encode in [
    ("hf_tokenizers", "hf:" + tokenizer_json,
     lambda: [e.ids for e in tok.encode_batch(docs, add_special_tokens=False)]),
    ("tiktoken", "tiktoken:" + ranks_file + ":cl100k", lambda: enc.encode_ordinary_batch(docs, num_threads=args.threads)),
]:
    encode_small = docs[:64]  # warm-up: thread pools, caches
    if name == "hf_tokenizers":
        tok.encode_batch(encode_small, add_special_tokens=False)
    else:
        enc.encode_ordinary_batch(encode_small, num_threads=args.threads)
    start = time.perf_counter()
    ids = encode()
    ref_s = time.perf_counter() - start
    ref_tokens = sum(len(x) for x in ids)
    linea_s, stream, eos_id, summary = run_linea(spec, name)
    ref = reference_stream(ids, eos_id if name == "tiktoken" else eos)
    same = bool(stream.shape == ref.shape and np.array_equal(stream, ref))
    linea_tokens = int(stream.shape[0]) - len(docs)
    emit({"bench": "tokenizer_throughput", "reference": name, "threads": args.threads, "documents": len(docs),
          "text_mb": text_bytes / 1e6, "reference_s": ref_s, "reference_mb_per_s": text_bytes / 1e6 / ref_s,
          "reference_tokens_per_s": ref_tokens / ref_s, "linea_s": linea_s,
          "linea_mb_per_s": text_bytes / 1e6 / linea_s, "linea_tokens_per_s": linea_tokens / linea_s,
          "ratio_linea_over_reference": ref_s / linea_s, "ids_identical": same, "tokens": ref_tokens,
          "linea_summary": summary})
sys.exit(0)
