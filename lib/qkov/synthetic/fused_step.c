/* One SGD step of every member of a qkov ensemble, one member at a time in cache.
 *
 * The same mathematics as qkov.synthetic.models.Ensemble.step_eager (the tests compare the
 * two): per member, attention from the query row of W_QK (or the given fixed attention),
 * logits W_O (W_V a) + b, cross-entropy on the correct token, and SGD with a QK and an OV
 * learning rate. On a member's 32 x 50 tensors every PyTorch operator costs more in
 * dispatch than in arithmetic; here a member's whole step runs in L1 cache.
 *
 * Storage (float32, contiguous, as the ensemble keeps it): W_Q, W_K, W_V, W_O (E, V, V),
 * b (E, V); a collapsed circuit is stored with the identity as its first factor (W_Q or
 * W_V), which this kernel never multiplies by: qk_factorized[e] says whether W_Q is a real
 * factor, and the first n_collapsed_ov members have W_V = I.
 *
 * Inside, rows of length V are padded to P (whole vectors of VW floats; the padding holds
 * zeros, or -inf before a softmax) so that every row operation is a few vector operations
 * held in registers. Zero attention is exact (exp(-inf) = 0, or a fixed attention's zero)
 * and contributes nothing, so products with attention skip it: a sequence holds about 21
 * of the 50 tokens. Results differ from the eager step by floating-point rounding only.
 *
 * Compiled by qkov.synthetic.fused with V and the number of classes fixed at compile time
 * (-DQKOV_V=50 -DQKOV_CLASSES=4).
 */

#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#ifndef QKOV_V
#error "compile with -DQKOV_V=<vocabulary size>"
#endif
#define V QKOV_V
#ifdef __AVX512F__
#define VW 16                   /* floats per vector */
#else
#define VW 8
#endif
#define RB 4                    /* rows a dense product takes at once (sharing each load) */
#define NV ((V + VW - 1) / VW)  /* vectors per padded row */
#define P (NV * VW)             /* padded row length */
#ifndef QKOV_CLASSES
#error "compile with -DQKOV_CLASSES=<number of classes>"
#endif
#define NC QKOV_CLASSES         /* classes: query rows of W_QK */

typedef float vf __attribute__((vector_size(VW * sizeof(float)), aligned(sizeof(float))));
typedef int32_t vi __attribute__((vector_size(VW * sizeof(int32_t)), aligned(sizeof(int32_t))));

static inline vf splat(float x) { return (vf){} + x; }
static inline vf load(const float *p) { return *(const vf *)p; }
static inline void store(float *p, vf x) { *(vf *)p = x; }
/* mask ? a : b, lane by lane (mask: a vector comparison's all-ones or zero lanes) */
static inline vf blend(vi mask, vf a, vf b) { return (vf)(((vi)a & mask) | ((vi)b & ~mask)); }

/* exp(x) for x <= 0 (softmax arguments after subtracting the row maximum): x = n ln 2 + r
 * with |r| <= ln2/2, exp(r) by its degree-6 Taylor polynomial (relative error < 2e-7, about
 * one float ulp), times 2^n built in the exponent bits. Below -87.3 (under the smallest
 * normal float) the result is 0, so -inf gives 0; NaN stays NaN. */
static inline vf exp_nonpositive(vf x) {
    const vf log2e = splat(1.44269504088896341f);
#ifdef __AVX512F__  /* floor and the scaling by 2^n, one instruction each */
    vf n = (vf)_mm512_roundscale_ps((__m512)(x * log2e + 0.5f), _MM_FROUND_TO_NEG_INF);
#else
    vf t = x * log2e + 0.5f;
    vf n = __builtin_convertvector(__builtin_convertvector(t, vi), vf); /* toward 0 */
    n = blend(n > t, n - 1.0f, n);                        /* floor */
    n = blend(n < -126.0f, splat(-126.0f), n); /* keeps the exponent bits valid; masked below */
#endif
    vf r = x - n * 0.693359375f - n * -2.12194440e-4f;
    vf p = splat(1.0f / 720.0f);
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
#ifdef __AVX512F__
    vf y = (vf)_mm512_scalef_ps((__m512)p, (__m512)n);
#else
    vi bits = (__builtin_convertvector(n, vi) + 127) << 23;
    vf y = p * (vf)bits;
#endif
    return blend(x < -87.3f, splat(0.0f), y);
}

/* Rows of V floats as NV vectors; the last vector's lanes past V are padding. */
#define TAIL (V - (NV - 1) * VW)

static inline vi lanes(void) { /* 0, 1, ..., VW - 1 */
    vi lane;
    for (int l = 0; l < VW; l++) lane[l] = l;
    return lane;
}
static inline vi tail_lanes(void) { /* all-ones in the last vector's lanes that hold data */
    return lanes() < TAIL;
}

/* The tail of a row read or written without touching memory past it (masked on AVX-512:
 * a vector store, then smaller loads of it, or the reverse, stalls the store forwarding). */
#ifdef __AVX512F__
static inline vf load_tail(const float *p) {
    return (vf)_mm512_maskz_loadu_ps((__mmask16)((1u << TAIL) - 1), p);
}
static inline void store_tail(float *p, vf x) {
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << TAIL) - 1), (__m512)x);
}
#else
static inline vf load_tail(const float *p) {
    vf x = {};
    for (int l = 0; l < TAIL; l++) x[l] = p[l];
    return x;
}
static inline void store_tail(float *p, vf x) {
    for (int l = 0; l < TAIL; l++) p[l] = x[l];
}
#endif

/* x <- a row of V floats at p (padding lanes 0) / the row at p <- x (padding not written) */
static inline void load_row(const float *p, vf x[NV]) {
    for (int k = 0; k < NV - 1; k++) x[k] = load(p + k * VW);
    x[NV - 1] = load_tail(p + (NV - 1) * VW);
}
static inline void store_row(float *p, const vf x[NV]) {
    for (int k = 0; k < NV - 1; k++) store(p + k * VW, x[k]);
    store_tail(p + (NV - 1) * VW, x[NV - 1]);
}
static inline void load_padded(const float *p, vf x[NV]) { /* a padded row of P */
    for (int k = 0; k < NV; k++) x[k] = load(p + k * VW);
}
static inline void store_padded(float *p, const vf x[NV]) {
    for (int k = 0; k < NV; k++) store(p + k * VW, x[k]);
}

/* The maximum and the sum of a vector's lanes, by halving (log2 VW shuffles). */
#if VW == 16
#define HALVES(x, op)                                                                   \
    x = op(x, __builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, \
                                      6, 7));                                           \
    x = op(x, __builtin_shufflevector(x, x, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, \
                                      10, 11));                                         \
    x = op(x, __builtin_shufflevector(x, x, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, \
                                      12, 13));                                         \
    x = op(x, __builtin_shufflevector(x, x, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, \
                                      15, 14))
#else
#define HALVES(x, op)                                                        \
    x = op(x, __builtin_shufflevector(x, x, 4, 5, 6, 7, 0, 1, 2, 3));        \
    x = op(x, __builtin_shufflevector(x, x, 2, 3, 0, 1, 6, 7, 4, 5));        \
    x = op(x, __builtin_shufflevector(x, x, 1, 0, 3, 2, 5, 4, 7, 6))
#endif
static inline vf vmax(vf a, vf b) { return blend(a > b, a, b); }
static inline vf vadd(vf a, vf b) { return a + b; }
static inline float reduce_max(vf x) { HALVES(x, vmax); return x[0]; }
static inline float reduce_sum(vf x) { HALVES(x, vadd); return x[0]; }

/* x <- softmax(x) over the V lanes that hold data; padding lanes become 0. */
static inline void softmax(vf x[NV]) {
    x[NV - 1] = blend(tail_lanes(), x[NV - 1], splat(-INFINITY));
    vf m = x[0];
    for (int k = 1; k < NV; k++) m = vmax(x[k], m);
    const float mx = reduce_max(m);
    vf s = {};
    for (int k = 0; k < NV; k++) {
        x[k] = exp_nonpositive(x[k] - mx);
        s += x[k];
    }
    const float inv = 1.0f / reduce_sum(s);
    for (int k = 0; k < NV; k++) x[k] *= inv;
}

/* out (V x P) = in (V x V), padded with zeros; transposed if asked. */
static inline void padded(const float *restrict in, float *restrict out, int transposed) {
    if (!transposed) {
        vf x[NV];
        for (int i = 0; i < V; i++) {
            load_row(in + i * V, x);
            store_padded(out + i * P, x);
        }
        return;
    }
    for (int i = 0; i < V; i++) {
        for (int j = 0; j < V; j++) out[i * P + j] = in[j * V + i];
        for (int j = V; j < P; j++) out[i * P + j] = 0.0f;
    }
}

/* y[r] = init + sum_j x[r][j] * m[j] for r < B (rows of P; m is V x P), skipping zeros of
 * x (exact): x times the matrix whose transpose is m. init may be NULL (zeros). */
static inline void rows_times(int64_t B, const float *restrict x, const float *restrict m,
                              const float *restrict init, float *restrict y) {
    for (int64_t r = 0; r < B; r++) {
        vf acc[NV];
        for (int k = 0; k < NV; k++) acc[k] = init ? load(init + k * VW) : splat(0.0f);
        const float *restrict xr = x + r * P;
        for (int j = 0; j < V; j++) {
            const float xj = xr[j];
            if (xj == 0.0f) continue;
            const vf xs = splat(xj);
            for (int k = 0; k < NV; k++) acc[k] += xs * load(m + j * P + k * VW);
        }
        for (int k = 0; k < NV; k++) store(y + r * P + k * VW, acc[k]);
    }
}

/* y[r] = sum_j x[r][j] * m[j] as rows_times for a dense x: RB rows at a time, so that
 * each row of m loaded serves RB rows. */
static inline void rows_times_dense(int64_t B, const float *restrict x,
                                    const float *restrict m, float *restrict y) {
    int64_t r = 0;
    for (; r + RB <= B; r += RB) {
        vf acc[RB][NV];
        for (int q = 0; q < RB; q++)
            for (int k = 0; k < NV; k++) acc[q][k] = splat(0.0f);
        for (int j = 0; j < V; j++) {
            vf mj[NV];
            for (int k = 0; k < NV; k++) mj[k] = load(m + j * P + k * VW);
            for (int q = 0; q < RB; q++) {
                const vf xs = splat(x[(r + q) * P + j]);
                for (int k = 0; k < NV; k++) acc[q][k] += xs * mj[k];
            }
        }
        for (int q = 0; q < RB; q++)
            for (int k = 0; k < NV; k++) store(y + (r + q) * P + k * VW, acc[q][k]);
    }
    if (r < B) rows_times(B - r, x + r * P, m, NULL, y + r * P);
}

/* w (V x V, unpadded) -= rate * d^T x, with d and x B x P: row i of the gradient is
 * sum_r d[r][i] x[r], accumulated in registers, RB rows i at a time. */
static inline void descend_outer(int64_t B, const float *restrict d, const float *restrict x,
                                 float rate, float *restrict w) {
    for (int i0 = 0; i0 < V; i0 += RB) {
        const int n = V - i0 < RB ? V - i0 : RB;
        vf acc[RB][NV];
        for (int q = 0; q < RB; q++)
            for (int k = 0; k < NV; k++) acc[q][k] = splat(0.0f);
        for (int64_t r = 0; r < B; r++) {
            vf xr[NV];
            for (int k = 0; k < NV; k++) xr[k] = load(x + r * P + k * VW);
            for (int q = 0; q < RB; q++) {  /* d's padding is read past V; unused */
                const vf ds = splat(d[r * P + i0 + q]);
                for (int k = 0; k < NV; k++) acc[q][k] += ds * xr[k];
            }
        }
        for (int q = 0; q < n; q++) {
            vf wr[NV];
            load_row(w + (i0 + q) * V, wr);
            for (int k = 0; k < NV; k++) wr[k] -= rate * acc[q][k];
            store_row(w + (i0 + q) * V, wr);
        }
    }
}

/* Work space this kernel needs, in floats, for B sequences. */
int64_t qkov_probe_work_floats(int64_t n_rows) { return (n_rows + 1) * P + VW; }

int64_t qkov_work_floats(int64_t B) { return 5 * B * P + 6 * V * P + 2 * NC * P + 2 * P + VW; }

/* Returns 0, or before changing anything: -1 if n_classes is not the compiled NC or
 * query_row0 + NC > V, -2 if a member's stream is not in [0, S), -3 if a target is not a
 * token, -4 if a class is not in [0, NC). (Indices are checked: a bad one would read or
 * write outside the tensors.)
 *
 * The data come per stream (S of them), not per member: member e reads stream
 * member_stream[e] - members on the same data share one copy. Fixed attention is given
 * as its two parts (qkov.synthetic.models.FixedAttentionParts): member e attends
 * data + fixed_alpha[e] * data_step; without data_step, data is the attention itself. */
int qkov_ensemble_step(
    int64_t E, int64_t B, int64_t n_collapsed_ov, int fixed,
    int64_t n_classes, int64_t query_row0, float scale,
    int64_t S, const int64_t *restrict member_stream, /* (E,) */
    const float *restrict data,      /* (S,B,V): log counts; if fixed, attention's `off` */
    const float *restrict data_step, /* (S,B,V): fixed attention's `step`, or NULL */
    const float *restrict fixed_alpha, /* (E,), read with data_step */
    const int64_t *restrict classes, /* (S,B) class of each sequence (not read if fixed) */
    const int64_t *restrict targets, /* (S,B) index of the correct next token */
    float *restrict W_Q, float *restrict W_K, /* (E,V,V); NULL if fixed */
    float *restrict W_V, float *restrict W_O, float *restrict b,
    const float *restrict qk_factorized, const float *restrict has_bias, /* (E,) 0 or 1 */
    const float *restrict lr_qk, const float *restrict lr_ov, /* (E,) */
    float *restrict p_target,        /* (E,B) out: probability of the correct token */
    float *restrict work)            /* qkov_work_floats(B) floats */
{
    if (n_classes != NC || query_row0 < 0 || query_row0 + NC > V) return -1;
    for (int64_t e = 0; e < E; e++)
        if (member_stream[e] < 0 || member_stream[e] >= S) return -2;
    for (int64_t i = 0; i < S * B; i++) {
        if (targets[i] < 0 || targets[i] >= V) return -3;
        if (!fixed && (classes[i] < 0 || classes[i] >= NC)) return -4;
    }
    /* align the work space to a vector */
    work += (VW - ((uintptr_t)work / sizeof(float)) % VW) % VW;
    float *a = work, *hid = a + B * P, *z = hid + B * P, *dh = z + B * P, *da = dh + B * P;
    float *wot = da + B * P, *wop = wot + V * P, *wvt = wop + V * P, *wvp = wvt + V * P;
    float *wkp = wvp + V * P, *wkt = wkp + V * P, *rows = wkt + V * P, *g = rows + NC * P;
    float *bias = g + NC * P, *tmp = bias + P;
    for (int64_t e = 0; e < E; e++) {
        const int64_t vv = e * V * V;
        float *wo = W_O + vv, *wv = W_V + vv, *be = b + e * V;
        const int64_t se = member_stream[e];
        const float *x_in = data + se * B * V;
        const int64_t *cl = fixed ? NULL : classes + se * B, *tg = targets + se * B;
        const int factorized_ov = e >= n_collapsed_ov;
        const float rate_ov = lr_ov[e] / (float)B;

        /* 1. attention a (B x P) */
        if (fixed) {
            const float *st = data_step ? data_step + se * B * V : NULL;
            const vf alpha = splat(data_step ? fixed_alpha[e] : 0.0f);
            for (int64_t r = 0; r < B; r++) {
                vf x[NV], y[NV];
                load_row(x_in + r * V, x);
                if (st) {
                    load_row(st + r * V, y);
                    for (int k = 0; k < NV; k++) x[k] += alpha * y[k];
                }
                store_padded(a + r * P, x);
            }
        } else {
            const float *wq = W_Q + vv, *wk = W_K + vv;
            padded(wk, wkp, 0);
            if (qk_factorized[e] != 0.0f) { /* rows[q] = sum_i W_Q[i][q0+q] W_K[i] */
                vf acc[NC][NV];
                for (int q = 0; q < NC; q++)
                    for (int k = 0; k < NV; k++) acc[q][k] = splat(0.0f);
                for (int i = 0; i < V; i++)
                    for (int q = 0; q < NC; q++) {
                        const vf c = splat(wq[i * V + query_row0 + q]);
                        for (int k = 0; k < NV; k++) acc[q][k] += c * load(wkp + i * P + k * VW);
                    }
                for (int q = 0; q < NC; q++)
                    for (int k = 0; k < NV; k++) store(rows + q * P + k * VW, acc[q][k]);
            } else {
                memcpy(rows, wkp + query_row0 * P, sizeof(float) * NC * P);
            }
            const vf sc = splat(scale);
            for (int64_t r = 0; r < B; r++) {
                const float *qr = rows + cl[r] * P;
                vf x[NV];
                load_row(x_in + r * V, x);
                for (int k = 0; k < NV; k++) x[k] += sc * load(qr + k * VW);
                softmax(x);
                store_padded(a + r * P, x);
            }
        }

        /* 2. logits z = W_O (W_V a) + b, their softmax, p_target, dz = softmax - onehot */
        padded(wo, wot, 1);
        {
            vf x[NV];
            load_row(be, x);
            store_padded(bias, x);
        }
        const float *ov_in = a; /* what W_O reads: the attention, or W_V times it */
        if (factorized_ov) {
            padded(wv, wvt, 1);
            rows_times(B, a, wvt, NULL, hid);
            ov_in = hid;
            rows_times_dense(B, hid, wot, z); /* hidden is dense; then the bias */
            for (int64_t r = 0; r < B; r++)
                for (int k = 0; k < NV; k++)
                    store(z + r * P + k * VW, load(z + r * P + k * VW) + load(bias + k * VW));
        } else {
            rows_times(B, a, wot, bias, z);
        }
        const vi lane = lanes();
        for (int64_t r = 0; r < B; r++) {
            vf x[NV];
            load_padded(z + r * P, x);
            softmax(x);
            const int64_t t = tg[r];
            p_target[e * B + r] = x[t / VW][t % VW];
            x[t / VW] -= blend(lane == (vi){} + (int32_t)(t % VW), splat(1.0f), splat(0.0f));
            store_padded(z + r * P, x);
        }

        /* 3. backward through W_O and W_V before they move: dh = dz W_O, da = dh W_V */
        if (factorized_ov || !fixed) {
            padded(wo, wop, 0);
            rows_times_dense(B, z, wop, factorized_ov ? dh : da);
            if (factorized_ov && !fixed) {
                padded(wv, wvp, 0);
                rows_times_dense(B, dh, wvp, da);
            }
        }

        /* 4. OV descent: W_O -= rate dz^T ov_in, W_V -= rate dh^T a, b -= rate sum_r dz */
        descend_outer(B, z, ov_in, rate_ov, wo);
        if (factorized_ov) descend_outer(B, dh, a, rate_ov, wv);
        if (has_bias[e] != 0.0f) {
            vf s[NV];
            for (int k = 0; k < NV; k++) s[k] = splat(0.0f);
            for (int64_t r = 0; r < B; r++)
                for (int k = 0; k < NV; k++) s[k] += load(z + r * P + k * VW);
            vf x[NV];
            load_row(be, x);
            for (int k = 0; k < NV; k++) x[k] -= rate_ov * s[k];
            store_row(be, x);
        }
        if (fixed) continue;

        /* 5. QK descent: dscores = (da - <a, da>) a, summed per class into the gradient g
         * of the query rows; W_QK = W_Q^T W_K: W_K -= rate W_Q[:, q0:] g and
         * W_Q[:, q0+q] -= rate (W_K g^T)[:, q] (with W_K before it moves). */
        memset(g, 0, sizeof(float) * NC * P);
        for (int64_t r = 0; r < B; r++) {
            const float *ar = a + r * P, *dr = da + r * P;
            vf d = {};
            for (int k = 0; k < NV; k++) d += load(ar + k * VW) * load(dr + k * VW);
            const float dot = reduce_sum(d);
            float *gr = g + cl[r] * P;
            for (int k = 0; k < NV; k++)
                store(gr + k * VW, load(gr + k * VW) +
                      (load(dr + k * VW) - dot) * load(ar + k * VW));
        }
        const float rate_qk = lr_qk[e] * scale / (float)B;
        float *wq = W_Q + vv, *wk = W_K + vv;
        if (qk_factorized[e] != 0.0f) {
            /* gq[q][i] = sum_v W_K[i][v] g[q][v] (W_K before it moves): rows of W_K^T */
            padded(wk, wkt, 1);
            vf gq[NC][NV];
            for (int q = 0; q < NC; q++)
                for (int k = 0; k < NV; k++) gq[q][k] = splat(0.0f);
            for (int v = 0; v < V; v++)
                for (int q = 0; q < NC; q++) {
                    const vf c = splat(g[q * P + v]);
                    for (int k = 0; k < NV; k++) gq[q][k] += c * load(wkt + v * P + k * VW);
                }
            for (int i = 0; i < V; i++) { /* W_K[i] -= rate sum_q W_Q[i][q0+q] g[q] */
                vf acc[NV];
                for (int k = 0; k < NV; k++) acc[k] = splat(0.0f);
                for (int q = 0; q < NC; q++) {
                    const vf c = splat(wq[i * V + query_row0 + q]);
                    for (int k = 0; k < NV; k++) acc[k] += c * load(g + q * P + k * VW);
                }
                vf x[NV];
                load_row(wk + i * V, x);
                for (int k = 0; k < NV; k++) x[k] -= rate_qk * acc[k];
                store_row(wk + i * V, x);
            }
            for (int q = 0; q < NC; q++) {
                for (int k = 0; k < NV; k++) store(tmp + k * VW, gq[q][k]);
                for (int i = 0; i < V; i++) wq[i * V + query_row0 + q] -= rate_qk * tmp[i];
            }
        } else {
            for (int q = 0; q < NC; q++)
                for (int v = 0; v < V; v++)
                    wk[(query_row0 + q) * V + v] -= rate_qk * g[q * P + v];
        }
    }
    return 0;
}

/* Token counts of sampled sequences (qkov.synthetic.tasks): row r holds the tokens
 * table[classes[r] * n_slots + slots[r][l]] for l < L and the query token query_row0 +
 * classes[r]; counts (R, V) gets how often each token occurs. Exact (whole numbers).
 * Returns 0, or before writing anything -1 if a class is not a row of the table (of
 * n_classes), a slot not in [0, n_slots), or a token (of the table or a query) not one of V. */
int qkov_count_tokens(int64_t R, int64_t L, const int64_t *restrict slots,
                      const int64_t *restrict classes, const int64_t *restrict table,
                      int64_t n_classes, int64_t n_slots, int64_t query_row0,
                      float *restrict counts) {
    for (int64_t i = 0; i < n_classes * n_slots; i++)
        if (table[i] < 0 || table[i] >= V) return -1;
    for (int64_t r = 0; r < R; r++) {
        if (classes[r] < 0 || classes[r] >= n_classes) return -1;
        if (query_row0 + classes[r] < 0 || query_row0 + classes[r] >= V) return -1;
        for (int64_t l = 0; l < L; l++)
            if (slots[r * L + l] < 0 || slots[r * L + l] >= n_slots) return -1;
    }
    memset(counts, 0, sizeof(float) * R * V);
    for (int64_t r = 0; r < R; r++) {
        const int64_t *row_table = table + classes[r] * n_slots, *sr = slots + r * L;
        float *cr = counts + r * V;
        for (int64_t l = 0; l < L; l++) cr[row_table[sr[l]]] += 1.0f;
        cr[query_row0 + classes[r]] += 1.0f;
    }
    return 0;
}

/* expm1(x) to about one float ulp: its Taylor polynomial (to x^8) where |x| < 1/2, where
 * exp(x) - 1 would lose digits, and exp(x) - 1 elsewhere (|exp(x) - 1| > 0.39 there). */
static inline vf expm1_vec(vf x) {
    vf p = splat(1.0f / 40320.0f);
    p = p * x + 1.0f / 5040.0f;
    p = p * x + 1.0f / 720.0f;
    p = p * x + 1.0f / 120.0f;
    p = p * x + 1.0f / 24.0f;
    p = p * x + 1.0f / 6.0f;
    p = p * x + 0.5f;
    p = p * x + 1.0f;
    vf ax = blend(x < 0.0f, -x, x);
    return blend(ax < 0.5f, p * x, exp_nonpositive(x) - 1.0f);
}

/* Fig. 3's per-epoch measurement (qkov.synthetic.metrics.SharpeningProbe) of E OV circuits
 * on n held-out sequences of one class: with the hidden state h = off + alpha s under fixed
 * attention alpha (off on the tokens off_tokens, s on step_tokens), logits z = W_OV h + b
 * and D = W_OV s, each member's sums over the sequences of
 *   loss: -log softmax(z)[t]
 *   drop: a D[t] - log1p(sum_i softmax(z)_i expm1(a D_i)),  a = a_step[e]
 * are added to losses[e] and drops[e] (in double). w_ov_t: (E, V, V), W_OV transposed
 * (row j is what token j adds to the logits); bias (E, V); off (n, n_off), step (n,
 * n_step); targets (n,). Returns 0, or before changing anything -1 if n_off or n_step
 * exceed V or a token or target is not one of V. */
int qkov_sharpening_probe(int64_t E, int64_t n, const float *restrict w_ov_t,
                          const float *restrict bias, const float *restrict alpha,
                          const float *restrict a_step, int64_t n_off,
                          const int64_t *restrict off_tokens, const float *restrict off,
                          int64_t n_step, const int64_t *restrict step_tokens,
                          const float *restrict step, const int64_t *restrict targets,
                          double *restrict losses, double *restrict drops,
                          float *restrict work) /* (n_off + n_step + 1) * P + VW floats */
{
    if (n_off > V || n_step > V) return -1;
    for (int64_t k = 0; k < n_off; k++)
        if (off_tokens[k] < 0 || off_tokens[k] >= V) return -1;
    for (int64_t k = 0; k < n_step; k++)
        if (step_tokens[k] < 0 || step_tokens[k] >= V) return -1;
    for (int64_t s = 0; s < n; s++)
        if (targets[s] < 0 || targets[s] >= V) return -1;
    work += (VW - ((uintptr_t)work / sizeof(float)) % VW) % VW;
    float *rows_off = work, *rows_step = rows_off + n_off * P, *b = rows_step + n_step * P;
    for (int64_t e = 0; e < E; e++) {
        const float *wt = w_ov_t + e * V * V;
        vf x[NV];
        for (int64_t k = 0; k < n_off; k++) {
            load_row(wt + off_tokens[k] * V, x);
            store_padded(rows_off + k * P, x);
        }
        for (int64_t k = 0; k < n_step; k++) {
            load_row(wt + step_tokens[k] * V, x);
            store_padded(rows_step + k * P, x);
        }
        load_row(bias + e * V, x);
        store_padded(b, x);
        const vf al = splat(alpha[e]), as = splat(a_step[e]);
        double loss = 0.0, drop = 0.0;
        for (int64_t s = 0; s < n; s++) {
            vf z[NV], d[NV];
            for (int k = 0; k < NV; k++) {
                z[k] = load(b + k * VW);
                d[k] = splat(0.0f);
            }
            for (int64_t j = 0; j < n_off; j++) {
                const vf c = splat(off[s * n_off + j]);
                for (int k = 0; k < NV; k++) z[k] += c * load(rows_off + j * P + k * VW);
            }
            for (int64_t j = 0; j < n_step; j++) {
                const vf c = splat(step[s * n_step + j]);
                for (int k = 0; k < NV; k++) d[k] += c * load(rows_step + j * P + k * VW);
            }
            const int64_t t = targets[s];
            vf m = splat(-INFINITY), u[NV];
            for (int k = 0; k < NV; k++) {
                z[k] += al * d[k];
                u[k] = as * d[k];
            }
            z[NV - 1] = blend(tail_lanes(), z[NV - 1], splat(-INFINITY));
            for (int k = 0; k < NV; k++) m = vmax(z[k], m);
            const float mx = reduce_max(m);
            vf sum = {}, weighted = {};
            for (int k = 0; k < NV; k++) {
                const vf p = exp_nonpositive(z[k] - mx); /* 0 in the padding */
                sum += p;
                weighted += p * expm1_vec(u[k]);
            }
            const float total = reduce_sum(sum);
            loss -= (double)(z[t / VW][t % VW] - mx - logf(total));
            drop += (double)(u[t / VW][t % VW] - log1pf(reduce_sum(weighted) / total));
        }
        losses[e] += loss;
        drops[e] += drop;
    }
    return 0;
}
