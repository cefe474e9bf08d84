#!/usr/bin/env python3
"""Compare linea's logits with those of fla's own model classes, both ways (issue 18).

For every case below (a small linea [model] config of each mixer family that fla has a model type
for, pure and with fla's hybrid attention block):

  linea → fla   `linea train` the case for a few steps on the CPU (MQAR data: no corpus needed;
                AdamW at lr 1e-2 so that every tensor moves off its init), `linea export --format hf`
                it, load the export with transformers' AutoModelForCausalLM.from_pretrained (importing
                fla registers its model types), and compare fla's logits on random token sequences
                with `linea logits` of the run on the same tokens.
  fla → linea   build fla's model from the export's config.json with fla's own initialisation
                (AutoModelForCausalLM.from_config, torch.manual_seed(--seed)), move every tensor off
                its init (p += 0.2·s·N(0, 1), s = p's standard deviation, or 1 where p is constant:
                norm gains, biases, lower bounds, D), save it with fla's save_pretrained, and compare
                fla's logits of that model with `linea logits hf:DIR --config CASE.toml`.

Each comparison is run with fla's model in f32 and in bf16 (--dtypes); linea's logits are always
its CPU f32 forward. The figure is the relative RMS over all S × T × vocab logits,
    rel_rms = ‖fla − linea‖₂ / ‖linea‖₂,
against issue 18's tolerances: 1e-3 in f32, 2e-2 in bf16.

Inputs:
  FLA_SRC (environment)  the folder holding fla's `fla` package (default: .gpu-fla); torch,
                         transformers, triton and einops must be importable.
  --linea PATH           the linea binary (default: build-gpu/linea, else build/linea).
  --work DIR             where runs, exports, token files and logits go (default: /tmp/fla-compare;
                         each case in DIR/CASE/, kept for inspection).
  --cases LIST           comma-separated case names (default: every case; --list prints them).
  --dtypes LIST          f32,bf16 (default both).
  --batch S --seq-len T  the token sequences (default 2 × 64; every sequence one document; fla's
                         layers take their fused_recurrent kernels at T ≤ 64, chunk ones above).
  --seed N               tokens and fla's init (default 0).
  --attention MODE       how fla's softmax attention runs: auto (default: flash_attn in bf16 when it
                         is installed; in f32, which flash_attn lacks, or without it, a reference in
                         torch), flash, or reference. The reference replaces flash_attn_func in
                         fla.layers.attn: causal softmax(q kᵀ / √d) v in f32, with fla's sliding
                         window (window_size − 1 keys back) and its GQA grouping.
  --out FILE             also append the JSON lines there.
  --skip-fla             run linea's side only (train, export, logits; no torch needed): a check of
                         the set-up.

Outputs: one JSON line per (case, direction, dtype) on stdout:
  {"case", "direction": "linea->fla" | "fla->linea", "dtype", "rel_rms", "max_abs_diff",
   "tolerance", "pass", "attention"} (or "error" instead of the figures), bf16 lines also with
  "fla_vs_own_f32_rel_rms" (fla's bf16 logits against its own f32 logits of the same model: the
  share of rel_rms that is fla's bf16 rounding), then a summary table.
  TRITON_F32_DEFAULT is set to "ieee" unless given (Triton's f32 dots otherwise use TF32, about
  1e-3 relative), and torch's TF32 is off. Exit status 1 when a comparison fails or errs.
"""
import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOLERANCE = {'f32': 1e-3, 'bf16': 2e-2}
VOCAB = 512

# ---- the cases: linea [model] tables (fla's model type follows from the mixer) -----------------
ATTENTION = '[model.attention]\nheads = 4\nkv_heads = 2\nhead_dim = 32\nrope_theta = 10000.0\n'
LINEAR = '[model.linear]\nheads = 2\nd_k = 64\nd_v = 64\nconv = 4\noutput_gate = true\n'
MIXER_TABLES = {
    'deltanet': LINEAR,
    'gdn': LINEAR,
    'kda': LINEAR,
    'gla': '[model.gla]\nheads = 2\nexpand_k = 0.5\nexpand_v = 1.0\ngate_rank = 16\ngate_normalizer = 16.0\n',
    'retnet': '[model.retnet]\nheads = 2\nexpand_k = 1.0\nexpand_v = 2.0\nrope_theta = 10000.0\n',
    'hgrn': '[model.hgrn]\nexpand_ratio = 1\nlower_bound = true\n',
    'hgrn2': '[model.hgrn2]\nexpand_ratio = 64\nlower_bound = true\n',
    'mamba2': '[model.mamba2]\nexpand = 2\nhead_dim = 64\nstate_size = 64\nconv = 4\n',
}


def case_model(mixer, hybrid, tied):
    """The [model] tables of a case: d_model 128; 3 layers pure, 4 layers 3:1 hybrid."""
    text = '[model]\nd_model = 128\nlayers = %d\nvocab = %d\nmixer = "%s"\n' % (4 if hybrid else 3, VOCAB, mixer)
    text += 'hybrid = "3:1"\n' if hybrid else ''
    text += 'tie_embeddings = %s\nnorm_eps = 1e-5\ninit_std = 0.02\n' % ('true' if tied else 'false')
    text += 'mlp = false\n' if mixer == 'mamba2' else 'mlp_hidden = 256\n'
    return text + MIXER_TABLES.get(mixer, '') + ATTENTION


def cases():
    out = {'transformer': case_model('attention', False, True)}
    for mixer in MIXER_TABLES:
        out[mixer] = case_model(mixer, False, mixer == 'hgrn')
        if mixer != 'mamba2':  # fla's Mamba-2 has no hybrid attn block
            out[mixer + '-hybrid'] = case_model(mixer, True, mixer == 'gdn')
    return out


def run_config(model, run_dir):
    """A whole `linea train` config: a few AdamW steps on MQAR sequences, on the CPU."""
    return ('device = "cpu"\n[run]\ndir = "%s"\nname = "run"\n' % run_dir + model +
            '[train]\nsteps = 4\nbatch_seqs = 4\nseq_len = 64\nlog_every = 1\neval_every = 0\n'
            'checkpoint_every = 4\nseed = 1\nresume = "never"\n'
            '[optimizer]\nkind = "adamw"\nlr = 0.01\nschedule = "constant"\nwarmup_steps = 0\n'
            '[data]\npath = "mqar:vocab=%d,seq_len=64,pairs=8"\n' % VOCAB)


# ---- linea's side ---------------------------------------------------------------------------------
def sh(cmd):
    print('$ ' + ' '.join(cmd), file=sys.stderr, flush=True)
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        raise RuntimeError('%s exited %d:\n%s' % (cmd[1], done.returncode, done.stdout[-4000:]))
    return done.stdout


def linea_side(linea, name, model, work, tokens):
    """Trains, exports and scores case `name` in work/name/; returns the case's paths."""
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    paths = {'dir': d, 'toml': os.path.join(d, 'case.toml'), 'run': os.path.join(d, 'run'),
             'export': os.path.join(d, 'linea-hf'), 'linea_logits': os.path.join(d, 'linea-logits.safetensors'),
             'fla_hf': os.path.join(d, 'fla-hf'), 'import_logits': os.path.join(d, 'fla-hf-linea-logits.safetensors')}
    with open(paths['toml'], 'w') as f:
        f.write(run_config(model, d))
    sh([linea, 'train', paths['toml']])
    sh([linea, 'export', paths['run'], '--format', 'hf', paths['export']])
    sh([linea, 'logits', paths['run'], '--input', tokens, '--out', paths['linea_logits']])
    return paths


# ---- fla's side -----------------------------------------------------------------------------------
class Fla:
    def __init__(self, attention):
        sys.path.insert(0, os.path.abspath(os.environ.get('FLA_SRC', '.gpu-fla')))
        os.environ.setdefault('TRITON_F32_DEFAULT', 'ieee')
        import torch
        import transformers
        from safetensors.torch import load_file
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        import fla.layers.attn as attn
        import fla.models  # noqa: F401  (registers fla's model types with transformers' Auto classes)
        self.tie_heads_the_new_way(fla.models, transformers)
        self.torch, self.auto, self.load_file, self.attn = torch, transformers, load_file, attn
        self.flash = attn.flash_attn_func  # None when flash_attn is not installed
        self.mode = attention
        if attention == 'flash' and self.flash is None:
            raise RuntimeError('--attention flash: flash_attn is not installed')
        attn.flash_attn_func = self.reference_attention  # fla's Attention refuses to build without one

    @staticmethod
    def tie_heads_the_new_way(models, transformers):
        """transformers ≥ 5 reads a model's `_tied_weights_keys` as {tied tensor: source tensor}; fla's
        causal-LM classes still give the list form (["lm_head.weight"]), on which save_pretrained and
        post_init fail ("'list' object has no attribute 'keys'"). Give each the dict form: fla's head
        ties to its backbone's embedding table, `model.embeddings.weight`."""
        if int(transformers.__version__.split('.')[0]) < 5:
            return
        for name in dir(models):
            cls = getattr(models, name)
            keys = getattr(cls, '_tied_weights_keys', None) if isinstance(cls, type) else None
            if isinstance(keys, list):
                cls._tied_weights_keys = {key: 'model.embeddings.weight' for key in keys}

    def reference_attention(self, q, k, v, causal=True, window_size=(-1, -1), **unused):
        """flash_attn_func's contract ([B, T, H, D] q, [B, T, Hkv, D] k, v; query head h reads kv
        head h // (H / Hkv)) in f32 torch: softmax(q kᵀ / √D) v over keys j ≤ i, j ≥ i − window_size[0]."""
        torch = self.torch
        assert causal and not unused.get('softmax_scale'), 'reference attention: causal, default scale only'
        B, T, H, D = q.shape
        group = H // k.shape[2]
        qf = q.float().transpose(1, 2)
        kf = k.float().repeat_interleave(group, dim=2).transpose(1, 2)
        vf = v.float().repeat_interleave(group, dim=2).transpose(1, 2)
        scores = qf @ kf.transpose(-1, -2) / math.sqrt(D)
        i = torch.arange(T, device=q.device)[:, None]
        j = torch.arange(k.shape[1], device=q.device)[None, :]
        allowed = j <= i
        if window_size[0] >= 0:
            allowed = allowed & (j >= i - window_size[0])
        scores = scores.masked_fill(~allowed, float('-inf'))
        return (scores.softmax(-1) @ vf).transpose(1, 2).to(q.dtype)

    def attention_for(self, dtype):
        use_flash = self.mode == 'flash' or (self.mode == 'auto' and dtype == 'bf16' and self.flash is not None)
        self.attn.flash_attn_func = self.flash if use_flash else self.reference_attention
        return 'flash_attn' if use_flash else 'reference'

    def load(self, path):
        """fla's model of an export, f32 on the GPU; refuses missing or unexpected tensors."""
        model, info = self.auto.AutoModelForCausalLM.from_pretrained(path, output_loading_info=True)
        tied = bool(getattr(model.config, 'tie_word_embeddings', False))
        missing = [k for k in info.get('missing_keys', []) if not (tied and k == 'lm_head.weight')]
        wrong = missing + list(info.get('unexpected_keys', [])) + [str(m) for m in info.get('mismatched_keys', [])]
        if wrong:
            raise RuntimeError('fla could not place every tensor of %s: %s' % (path, wrong))
        model = model.float().cuda().eval()
        self.check_tied(model)
        return model

    def check_tied(self, model):
        """With tie_word_embeddings the head must be the embedding (transformers ties it)."""
        if getattr(model.config, 'tie_word_embeddings', False):
            head, table = model.get_output_embeddings().weight, model.get_input_embeddings().weight
            if not self.torch.equal(head, table):
                raise RuntimeError('tie_word_embeddings is true but lm_head.weight is not the embedding')

    def fla_initialised(self, export, seed):
        """fla's model from an export's config.json with fla's init, moved off it; f32 on the GPU."""
        torch = self.torch
        config = self.auto.AutoConfig.from_pretrained(export)
        torch.manual_seed(seed)
        model = self.auto.AutoModelForCausalLM.from_config(config).float()
        with torch.no_grad():
            for p in model.parameters():
                s = p.std().item() if p.numel() > 1 else 0.0
                p.add_(0.2 * (s if s > 0 else 1.0) * torch.randn_like(p))
        model = model.cuda().eval()
        self.check_tied(model)
        return model

    def logits(self, model, ids, dtype):
        """fla's logits [S, T, vocab] in f32 of the model cast to dtype (cast in place: f32 first)."""
        torch = self.torch
        model.to(torch.bfloat16 if dtype == 'bf16' else torch.float32)
        with torch.no_grad():
            return model(input_ids=ids, use_cache=False).logits.float()

    def compare(self, fla, linea_path):
        """rel_rms and max |Δ| of fla's logits against linea's (the reference)."""
        ref = self.load_file(linea_path)['logits'].to(fla.device)
        if ref.shape != fla.shape:
            raise RuntimeError('linea logits %s, fla logits %s' % (list(ref.shape), list(fla.shape)))
        diff = fla - ref
        return (diff.norm() / ref.norm()).item(), diff.abs().max().item()


def compare_case(fla, linea, name, paths, tokens_path, ids, dtypes, seed, emit):
    """Both directions of one case; emit(record) for every (direction, dtype)."""
    torch = fla.torch
    tokens = torch.tensor(ids, dtype=torch.long, device='cuda')

    def measure(direction, model, linea_logits):
        own_f32 = None  # fla's f32 logits of the same model: how far fla's bf16 run is from its own f32
        for dtype in dtypes:  # f32 before bf16: the cast is in place
            attention = fla.attention_for(dtype)
            logits = fla.logits(model, tokens, dtype)
            rel, worst = fla.compare(logits, linea_logits)
            record = {'case': name, 'direction': direction, 'dtype': dtype, 'rel_rms': rel, 'max_abs_diff': worst,
                      'tolerance': TOLERANCE[dtype], 'pass': rel <= TOLERANCE[dtype], 'attention': attention}
            if dtype == 'f32':
                own_f32 = logits
            elif own_f32 is not None:
                record['fla_vs_own_f32_rel_rms'] = ((logits - own_f32).norm() / own_f32.norm()).item()
            emit(record)

    measure('linea->fla', fla.load(paths['export']), paths['linea_logits'])
    model = fla.fla_initialised(paths['export'], seed)
    model.save_pretrained(paths['fla_hf'], safe_serialization=True)  # in f32, before measure casts it
    sh([linea, 'logits', 'hf:' + paths['fla_hf'], '--config', paths['toml'], '--input', tokens_path, '--out',
        paths['import_logits']])
    measure('fla->linea', model, paths['import_logits'])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    default_linea = next((p for p in ('build-gpu/linea', 'build/linea') if os.path.exists(os.path.join(REPO, p))),
                         'build/linea')
    parser.add_argument('--linea', default=os.path.join(REPO, default_linea))
    parser.add_argument('--work', default='/tmp/fla-compare')
    parser.add_argument('--cases', default='')
    parser.add_argument('--list', action='store_true')
    parser.add_argument('--dtypes', default='f32,bf16')
    parser.add_argument('--batch', type=int, default=2)
    parser.add_argument('--seq-len', type=int, default=64)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--attention', choices=['auto', 'flash', 'reference'], default='auto')
    parser.add_argument('--out', default='')
    parser.add_argument('--skip-fla', action='store_true')
    args = parser.parse_args()
    all_cases = cases()
    if args.list:
        print('\n'.join(all_cases))
        return 0
    names = [c for c in args.cases.split(',') if c] or list(all_cases)
    unknown = [c for c in names if c not in all_cases]
    if unknown:
        parser.error('unknown case(s) %s; --list names them' % ', '.join(unknown))
    dtypes = [d for d in args.dtypes.split(',') if d]
    if any(d not in TOLERANCE for d in dtypes):
        parser.error('--dtypes: f32 and/or bf16')

    args.work = os.path.abspath(args.work)
    os.makedirs(args.work, exist_ok=True)
    rng = random.Random(args.seed)
    ids = [[rng.randrange(VOCAB) for _ in range(args.seq_len)] for _ in range(args.batch)]
    tokens = os.path.join(args.work, 'tokens.json')
    with open(tokens, 'w') as f:
        json.dump({'input_ids': ids}, f)
    fla = None if args.skip_fla else Fla(args.attention)
    records = []

    def emit(record):
        records.append(record)
        line = json.dumps(record)
        print(line, flush=True)
        if args.out:
            with open(args.out, 'a') as f:
                f.write(line + '\n')

    for name in names:
        try:
            paths = linea_side(args.linea, name, all_cases[name], args.work, tokens)
            if fla is None:
                continue
            compare_case(fla, args.linea, name, paths, tokens, ids, dtypes, args.seed, emit)
        except Exception as e:  # one case's failure must not hide the others'
            traceback.print_exc()
            emit({'case': name, 'error': '%s: %s' % (type(e).__name__, e), 'pass': False})

    if fla is None:
        print('linea side of %d case(s) in %s, %d failed (--skip-fla: nothing compared)' %
              (len(names), args.work, len(records)))
        return 1 if records else 0
    print('\n%-16s %-11s %-5s %-12s %-6s %s' % ('case', 'direction', 'dtype', 'rel_rms', 'pass', 'fla bf16 vs its f32'))
    for r in records:
        if 'error' in r:
            print('%-16s %s' % (r['case'], 'ERROR ' + r['error'][:100]))
        else:
            own = r.get('fla_vs_own_f32_rel_rms')
            print('%-16s %-11s %-5s %-12.3e %-6s %s' % (r['case'], r['direction'], r['dtype'], r['rel_rms'], r['pass'],
                                                      '%.3e' % own if own is not None else ''))
    return 0 if records and all(r['pass'] for r in records) else 1


if __name__ == '__main__':
    sys.exit(main())
