#!/usr/bin/env python3
"""Writes the test fixtures of linea's data readers with the reference libraries, so that the C++
tests compare linea with what those libraries do (pyarrow, tokenizers and tiktoken are not Debian
packages; run this where they are installed, e.g. the GPU machine):

  python3 tests/data/make_fixtures.py OUT      # writes OUT/parquet/* and OUT/tokenizer/*

parquet/: one table written by pyarrow with every codec (none, snappy, gzip, zstd) x dictionary or
  plain x data page v1 or v2, in row groups of 16 rows and pages of a few hundred bytes; a column
  chunk whose dictionary overflows into plain pages; a required (non-null) text column; nested
  columns beside the flat ones; an empty file; a file without the `text` column; files linea must
  refuse with a clear error (DELTA_BYTE_ARRAY encoding, BROTLI codec). expected.json.gz holds the
  values pyarrow reads back from each file (each distinct table once) and what pyarrow says about
  each file's row groups and column chunks.
tokenizer/: a byte-level BPE trained by `tokenizers` on the committed corpus (corpus.json) and the
  parquet texts, saved as tokenizer.json in several pre-tokenizer set-ups (GPT-2 ByteLevel, with a
  prefix space, a LLaMA-3 and an o200k Split regex); a SentencePiece-style BPE (byte fallback,
  "▁" for spaces) as a normalizer and as a Metaspace pre-tokenizer; the byte-level model's merges
  as tiktoken ranks (ranks.tiktoken) encoded with the cl100k, o200k and LLaMA-3 regexes.
  expected_ids.json.gz holds every encoding of every corpus document, the library versions and
  the regexes tiktoken uses.
"""
import copy
import gzip
import json
import os
import random
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else HERE
PARQUET = os.path.join(OUT, "parquet")
TOKENIZER = os.path.join(OUT, "tokenizer")
failures = []

# Meta's LLaMA-3 tokenizer.py (tiktoken with these 128000 ranks and 256 special tokens after them).
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")

WORDS = ("the of and a to in is was for on that with as by it at from education students learning school "
         "teacher science history water energy health children research study data model text 1 2 3 42 "
         "2024 3.5 Straße naïve café façade niño über déjà ещё булок Москва Ελλάδα αλεπού 東京 学习 教育 "
         "日本語 ひらがな カタカナ 한국어 안녕 مرحبا العالم שלום हिन्दी ภาษาไทย 👍🏽 ✨ € ½ — “quoted” "
         "it's they're we'll I'm don't CamelCase HTTPServer /usr/bin \t tab\ttab line\nbreak").split(" ")


def step(name, fn, *args):
    try:
        return fn(*args)
    except Exception:  # record and go on: one failing part should not lose the others
        failures.append({"step": name, "error": traceback.format_exc()})
        print(f"FAILED: {name}\n{traceback.format_exc()}", file=sys.stderr)
        return None


def base_columns():
    """60 rows: texts with nulls and empty strings, multi-byte UTF-8, one long text spanning pages;
    numeric columns of each physical type FineWeb-Edu uses or --where may meet, with nulls."""
    rng = random.Random(20)
    rows = 60
    text = []
    for i in range(rows):
        if i % 11 == 5:
            text.append(None)
        elif i % 13 == 7:
            text.append("")
        else:
            text.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40))))
    text[3] = " ".join(rng.choice(WORDS) for _ in range(700))  # longer than a page
    return {
        "text": text,
        "id": [f"<urn:uuid:{i:04d}>" for i in range(rows)],
        "int_score": [None if i % 17 == 3 else rng.randint(0, 5) for i in range(rows)],
        "score": [None if i % 19 == 4 else round(rng.uniform(-1.0, 5.0), 6) for i in range(rows)],
        "token_count": [rng.randint(1, 5000) for _ in range(rows)],
        "language_score": [rng.uniform(0.5, 1.0) for _ in range(rows)],
        "language": [rng.choice(["en", "de", "fr", "ja"]) for _ in range(rows)],
    }


def parquet_fixtures():
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(PARQUET, exist_ok=True)
    cols = base_columns()
    schema = pa.schema([
        ("text", pa.string()), ("id", pa.string()), ("int_score", pa.int64()), ("score", pa.float64()),
        ("token_count", pa.int32()), ("language_score", pa.float32()), ("language", pa.string()),
    ])
    table = pa.table(cols, schema=schema)
    common = dict(row_group_size=16, data_page_size=600, write_batch_size=8)
    written = {}
    tables = {}  # the values pyarrow reads back, by the first file that holds them

    def write(name, tbl, expect, **options):
        path = os.path.join(PARQUET, name)
        pq.write_table(tbl, path, **{**common, **options})
        meta = pq.ParquetFile(path).metadata
        groups = []
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            columns = {}
            for c in range(rg.num_columns):
                cc = rg.column(c)
                columns[cc.path_in_schema] = {"codec": cc.compression, "encodings": list(cc.encodings),
                                              "dictionary_page": bool(cc.has_dictionary_page)}
            groups.append({"rows": rg.num_rows, "columns": columns})
        back = pq.read_table(path)
        values = {n: back.column(n).to_pylist() for n in back.column_names
                  if not pa.types.is_nested(back.schema.field(n).type)}
        table_name = next((t for t, v in tables.items() if v == values), name)  # each distinct table once
        tables[table_name] = values
        written[name] = {"expect": expect, "options": {k: str(v) for k, v in options.items()},
                         "rows": back.num_rows, "row_groups": groups, "table": table_name}

    for codec in ["NONE", "SNAPPY", "GZIP", "ZSTD"]:
        for dictionary in [True, False]:
            for version in ["1.0", "2.0"]:
                name = f"{codec.lower()}_{'dict' if dictionary else 'plain'}_v{version[0]}.parquet"
                write(name, table, "ok", compression=codec, use_dictionary=dictionary, data_page_version=version)
    write("dictionary_fallback.parquet", table, "ok", compression="SNAPPY", use_dictionary=True,
          dictionary_pagesize_limit=300)
    required = pa.table({"text": [t if t else "(empty)" for t in cols["text"]]},
                        schema=pa.schema([pa.field("text", pa.string(), nullable=False)]))
    write("required_text.parquet", required, "ok", compression="ZSTD", data_page_version="2.0")
    nested = table.append_column("tags", pa.array([[w for w in (t or "").split(" ")[:3]] for t in cols["text"]],
                                                   pa.list_(pa.string())))
    nested = nested.append_column("meta", pa.array([{"a": i, "b": str(i)} for i in range(table.num_rows)]))
    write("nested_columns.parquet", nested.select(["tags", "text", "meta", "int_score"]), "ok", compression="SNAPPY")
    write("empty.parquet", table.slice(0, 0), "ok", compression="SNAPPY")
    write("no_text_column.parquet", table.rename_columns(["content"] + table.column_names[1:]), "error: text",
          compression="SNAPPY")
    write("delta_byte_array.parquet", table.select(["text"]), "error: DELTA_BYTE_ARRAY", compression="SNAPPY",
          use_dictionary=False, column_encoding={"text": "DELTA_BYTE_ARRAY"})
    step("brotli parquet", lambda: write("brotli.parquet", table.select(["text"]), "error: BROTLI",
                                         compression="BROTLI"))
    return {"pyarrow": pa.__version__, "files": written, "tables": tables}


def bytes_to_unicode():
    """GPT-2's byte → printable character table (the ByteLevel alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def merge_pairs(model):
    return [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]


def tokenizer_fixtures(parquet_texts):
    import tokenizers
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    os.makedirs(TOKENIZER, exist_ok=True)
    with open(os.path.join(HERE, "tokenizer", "corpus.json"), encoding="utf-8") as f:
        corpus = json.load(f)
    train_text = corpus + [t for t in parquet_texts if t]
    result = {"tokenizers": tokenizers.__version__, "encodings": {}, "vocab_sizes": {}, "files": {}}

    def save_hf(name, tok):
        try:
            tok.encode_special_tokens = True  # special tokens written in a text are plain text (as linea)
            result["encode_special_tokens"] = True
        except AttributeError:
            result["encode_special_tokens"] = False
        path = os.path.join(TOKENIZER, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(tok.to_str())
        result["encodings"][name] = [e.ids for e in tok.encode_batch(corpus, add_special_tokens=False)]
        result["vocab_sizes"][name] = tok.get_vocab_size(with_added_tokens=True)
        result["files"][name] = name + ".json"

    def variant(base, edit):
        d = json.loads(base.to_str())
        edit(d)
        return Tokenizer.from_str(json.dumps(d))

    # Byte-level BPE (GPT-2 style).
    bl = Tokenizer(models.BPE())
    bl.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bl.decoder = decoders.ByteLevel()
    bl.train_from_iterator(train_text, trainers.BpeTrainer(
        vocab_size=900, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    save_hf("hf_bytelevel", bl)
    step("hf prefix space", lambda: save_hf("hf_bytelevel_prefix_space", variant(
        bl, lambda d: d["pre_tokenizer"].update({"add_prefix_space": True}))))

    def split_then_bytes(pattern, ignore_merges):
        t = Tokenizer.from_str(bl.to_str())
        t.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        return variant(t, lambda d: d["model"].update({"ignore_merges": ignore_merges}))

    patterns = step("tiktoken patterns", tiktoken_patterns) or {}
    patterns["llama3"] = LLAMA3_PATTERN
    step("hf llama3 split", lambda: save_hf("hf_llama3_split", split_then_bytes(LLAMA3_PATTERN, True)))
    if "o200k" in patterns:
        step("hf o200k split", lambda: save_hf("hf_o200k_split", split_then_bytes(patterns["o200k"], False)))

    # SentencePiece-style BPE: "▁" marks spaces, characters outside the vocabulary fall back to bytes.
    def sentencepiece_style():
        sp = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
        sp.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        sp.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                        decoders.Strip(" ", 1, 0)])
        sp.train_from_iterator(train_text, trainers.BpeTrainer(
            vocab_size=1100, special_tokens=["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)],
            limit_alphabet=120, show_progress=False))
        save_hf("hf_sp_bpe", sp)

        ms = Tokenizer.from_str(sp.to_str())
        ms.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
        ms = variant(ms, lambda d: d.update({"normalizer": None}))
        ms.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first", split=True)
        save_hf("hf_sp_metaspace", ms)
    step("sentencepiece-style", sentencepiece_style)

    # tiktoken: the byte-level model's merges as ranks (the 256 bytes, then each merge's result).
    step("tiktoken", tiktoken_fixtures, bl, corpus, patterns, result)
    result["patterns"] = patterns
    return result


def tiktoken_patterns():
    """The regexes of the installed tiktoken's cl100k_base and o200k_base (their rank files are
    not fetched: the loader is replaced by one returning no ranks)."""
    import tiktoken_ext.openai_public as public

    public.load_tiktoken_bpe = lambda *args, **kwargs: {}
    return {"cl100k": public.cl100k_base()["pat_str"], "o200k": public.o200k_base()["pat_str"]}


def tiktoken_fixtures(bl, corpus, patterns, result):
    import base64

    import tiktoken
    import tiktoken.load

    u2b = {c: b for b, c in bytes_to_unicode().items()}
    ranks = {bytes([b]): b for b in range(256)}
    for a, b in merge_pairs(json.loads(bl.to_str())["model"]):
        token = bytes(u2b[c] for c in a + b)
        ranks.setdefault(token, len(ranks))
    path = os.path.join(TOKENIZER, "ranks.tiktoken")
    with open(path, "w") as f:
        for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
            f.write(f"{base64.b64encode(token).decode()} {rank}\n")
    assert tiktoken.load.load_tiktoken_bpe(path) == ranks
    n = len(ranks)
    result["tiktoken"] = tiktoken.__version__
    for name, pattern in patterns.items():
        specials = {"<|begin_of_text|>": n, "<|end_of_text|>": n + 1} if name == "llama3" else {"<|endoftext|>": n + 1}
        enc = tiktoken.Encoding(name=f"test_{name}", pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)
        result["encodings"]["tiktoken_" + name] = [enc.encode_ordinary(doc) for doc in corpus]
        result["vocab_sizes"]["tiktoken_" + name] = enc.n_vocab
    result["files"]["tiktoken"] = "ranks.tiktoken"


def main():
    parquet = step("parquet", parquet_fixtures)
    if parquet:
        with gzip.open(os.path.join(PARQUET, "expected.json.gz"), "wt", encoding="utf-8") as f:
            json.dump(parquet, f, ensure_ascii=False)
    texts = base_columns()["text"]
    tok = step("tokenizers", tokenizer_fixtures, texts)
    if tok:
        with gzip.open(os.path.join(TOKENIZER, "expected_ids.json.gz"), "wt", encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "make_fixtures_failures.json"), "w") as f:
        json.dump(failures, f, indent=1)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
