# Why GPT-2 and Gemma 2 agree with kvscope to 1e-3 / 1e-2 only in llama.cpp:
# its CPU GELU rounds the input to float16 and reads a float16 table
# (ggml-cpu/vec.h, GGML_GELU_FP16). This forward of the fixture model in
# float32 (PyTorch) matches the fixture's Hugging Face logits exactly with an
# exact GELU, and llama.cpp's log-probabilities with the float16 GELU.
#   node tools/dump_logprobs.mjs gemma2.gguf tests/fixtures/logits/gemma2-tiny.json /tmp/g2.json
#   /usr/bin/python3 interop/llamacpp/tools/gelu_f16_emulation.py gemma2-tiny /tmp/g2.json .
import json, math, struct, sys, torch
def load(path):
    b = open(path, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8+n]); base = 8+n; out = {}
    for k, v in h.items():
        if k == '__metadata__': continue
        s, e = v['data_offsets']; out[k] = torch.frombuffer(bytearray(b[base+s:base+e]), dtype=torch.float32).reshape(v['shape'])
    return out
def gelu(x, f16):
    if not f16: return torch.nn.functional.gelu(x, approximate='tanh')
    xh = x.half().float()
    y = torch.nn.functional.gelu(xh, approximate='tanh').half().float()
    return torch.where(x <= -10, torch.zeros_like(x), torch.where(x >= 10, x, y))
def rms(x, w, eps): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1 + w)
def rope(x, pos, theta=10000.0):
    d = x.shape[-1]; inv = 1.0 / theta ** (torch.arange(0, d, 2).float() / d); f = pos[:, None].float() * inv[None]
    emb = torch.cat([f, f], -1); c, s = emb.cos(), emb.sin(); x1, x2 = x[..., :d//2], x[..., d//2:]
    return x * c + torch.cat([-x2, x1], -1) * s
def gemma2(W, ids, f16):
    L = len(ids); h = W['model.embed_tokens.weight'][ids] * torch.tensor(64 ** 0.5); pos = torch.arange(L)
    for l in range(4):
        p = f'model.layers.{l}.'; r = h; x = rms(h, W[p+'input_layernorm.weight'], 1e-6)
        q = (x @ W[p+'self_attn.q_proj.weight'].T).view(L, 4, 16).transpose(0, 1)
        k = (x @ W[p+'self_attn.k_proj.weight'].T).view(L, 2, 16).transpose(0, 1)
        v = (x @ W[p+'self_attn.v_proj.weight'].T).view(L, 2, 16).transpose(0, 1)
        q, k = rope(q, pos), rope(k, pos); k = k.repeat_interleave(2, 0); v = v.repeat_interleave(2, 0)
        s = q @ k.transpose(1, 2) * 24 ** -0.5; s = 6 * torch.tanh(s / 6)
        i = pos[:, None]; j = pos[None]; m = j <= i
        if l % 2 == 0: m = m & (j > i - 8)
        s = s.masked_fill(~m, float('-inf')); a = s.softmax(-1) @ v
        o = a.transpose(0, 1).reshape(L, 64) @ W[p+'self_attn.o_proj.weight'].T
        h = r + rms(o, W[p+'post_attention_layernorm.weight'], 1e-6); r = h
        x = rms(h, W[p+'pre_feedforward_layernorm.weight'], 1e-6)
        y = (gelu(x @ W[p+'mlp.gate_proj.weight'].T, f16) * (x @ W[p+'mlp.up_proj.weight'].T)) @ W[p+'mlp.down_proj.weight'].T
        h = r + rms(y, W[p+'post_feedforward_layernorm.weight'], 1e-6)
    z = rms(h, W['model.norm.weight'], 1e-6) @ W['model.embed_tokens.weight'].T
    return 10 * torch.tanh(z / 10)
def gpt2(W, ids, f16):
    L = len(ids); t = 'transformer.'; h = W[t+'wte.weight'][ids] + W[t+'wpe.weight'][:L]
    ln = lambda x, p: torch.nn.functional.layer_norm(x, (64,), W[p+'.weight'], W[p+'.bias'], 1e-5)
    for l in range(2):
        p = f'{t}h.{l}.'; x = ln(h, p+'ln_1'); qkv = x @ W[p+'attn.c_attn.weight'] + W[p+'attn.c_attn.bias']
        q, k, v = [z.view(L, 4, 16).transpose(0, 1) for z in qkv.split(64, -1)]
        s = q @ k.transpose(1, 2) / 4.0; s = s.masked_fill(torch.ones(L, L).triu(1).bool(), float('-inf'))
        a = (s.softmax(-1) @ v).transpose(0, 1).reshape(L, 64)
        h = h + a @ W[p+'attn.c_proj.weight'] + W[p+'attn.c_proj.bias']
        x = ln(h, p+'ln_2'); y = gelu(x @ W[p+'mlp.c_fc.weight'] + W[p+'mlp.c_fc.bias'], f16)
        h = h + y @ W[p+'mlp.c_proj.weight'] + W[p+'mlp.c_proj.bias']
    return ln(h, t+'ln_f') @ W[t+'wte.weight'].T
name, fwd = sys.argv[1], {'gemma2-tiny': gemma2, 'gpt2-tiny': gpt2}[sys.argv[1]]
root = sys.argv[3] if len(sys.argv) > 3 else '.'
W = load(f'{root}/tests/fixtures/models/{name}/model.safetensors')
cases = json.load(open(f'{root}/tests/fixtures/logits/{name}.json'))['cases']
ll = json.load(open(sys.argv[2]))
with torch.no_grad():
    for c, lp in zip(cases, ll):
        hf = torch.tensor(c['nocache']['last_logits']).log_softmax(-1)
        lpt = torch.tensor([x if x is not None else float('nan') for x in lp])
        ex = fwd(W, torch.tensor(c['ids']), False)[-1].log_softmax(-1)
        em = fwd(W, torch.tensor(c['ids']), True)[-1].log_softmax(-1)
        print(f"{len(c['ids'])} ids: exact-vs-HF {float((ex-hf).abs().max()):.2e}  llama-vs-HF {float((lpt-hf).abs().max()):.2e}  llama-vs-f16gelu-emulation {float((lpt-em).abs().max()):.2e}")
