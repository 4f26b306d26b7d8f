// embedding.cu — backend-cuda embedding gather and its deterministic
// scatter-add backward.
//
// Forward: one block per row: out[row, :] (+)= table[ids[row], :].
//
// Backward, without floating-point atomics (whose order would vary):
//  1. keys[i] = ids[i] (a bad id becomes `vocab`, which sorts last and is
//     skipped), values[i] = i;
//  2. CUB's radix sort of the (key, value) pairs — stable, so the rows of
//     one id stay in row order;
//  3. the sorted positions are cut into tiles of EB_TILE; per tile and
//     column, each id's run of rows is summed in row order. A run that lies
//     inside one tile is added straight into dtable, starting from dtable's
//     value — for f32 that is backend-cpu's arithmetic exactly (dtable +=
//     each row, in row order). A run that crosses tiles leaves one partial
//     sum per tile it touches: the "tail" partial of the tile where it starts
//     and a "head" partial of each later tile;
//  4. per run that crosses tiles: dtable + tail + head + head ..., in tile
//     order.
// The result depends only on ids and dout, never on timing: bit-identical
// across runs. Long runs (the [PAD] id, token type 0) are split across
// tiles, so no thread walks thousands of rows.
#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>
#include <stdint.h>

#include "backend_cuda.h"

namespace {

#define EB_TILE 32          // sorted positions per tile
#define EB_COLS 128         // columns (threads) per block
#define EB_NONE 0xffffffffu // "no key" beyond either end
#define EB_ALIGN 256

__device__ void report_bad_id(const tfc_id_check &chk, int op, int id, int row, int vocab)
{
    if (atomicMax(chk.claim, chk.gen) >= chk.gen) return; // this generation already has one
    tfc_id_error *r = chk.rec;
    r->op = op;
    r->id = id;
    r->row = row;
    r->vocab = vocab;
    __threadfence_system(); // the fields reach the host before the state does
    r->state = 2;
}

template <int DT>
__global__ void embedding_fwd_kernel(const int32_t *ids, const float *table, int vocab, int dim,
                                     void *out, int accumulate, tfc_id_check chk)
{
    int row = blockIdx.x;
    int id = ids[row];
    if (id < 0 || id >= vocab) {
        if (threadIdx.x == 0) report_bad_id(chk, TFC_OP_EMBEDDING_FWD, id, row, vocab);
        return;
    }
    const float *src = table + (size_t)id * (size_t)dim;
    size_t base = (size_t)row * (size_t)dim;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) {
        float v = src[j];
        if (accumulate) v = __fadd_rn(tfc_load<DT>(out, base + (size_t)j), v);
        tfc_store<DT>(out, base + (size_t)j, v);
    }
}

template <int DT>
cudaError_t embedding_fwd_launch(cudaStream_t s, const int32_t *ids, int rows, const float *table,
                                 int vocab, int dim, void *out, bool accumulate, tfc_id_check chk)
{
    int threads = dim >= TFC_THREADS ? TFC_THREADS : (dim + 31) / 32 * 32;
    TFCB_LAUNCH(embedding_fwd_kernel<DT>, (unsigned)rows, threads, 0, s)
        (ids, table, vocab, dim, out, accumulate ? 1 : 0, chk);
    return cudaGetLastError();
}

// --- backward -------------------------------------------------------------------------------

__global__ void embedding_keys_kernel(const int32_t *ids, int rows, int vocab, uint32_t *keys,
                                      uint32_t *values, tfc_id_check chk)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    int id = ids[i];
    bool ok = id >= 0 && id < vocab;
    if (!ok) report_bad_id(chk, TFC_OP_EMBEDDING_BWD, id, i, vocab);
    keys[i] = ok ? (uint32_t)id : (uint32_t)vocab;
    values[i] = (uint32_t)i;
}

// Step 3: per tile of sorted positions and column j. keys, rows: the sorted
// pairs; partial: [2 * tiles, dim] f32, slot 2t = head of tile t, 2t+1 = tail.
template <int DT>
__global__ void embedding_tiles_kernel(const uint32_t *keys, const uint32_t *rows_sorted, int n,
                                       const void *dout, float *dtable, int vocab, int dim,
                                       float *partial)
{
    __shared__ uint32_t k[EB_TILE + 2]; // k[0]: key before the tile, k[cnt+1]: key after
    __shared__ uint32_t r[EB_TILE];
    int t = blockIdx.x;
    int a = t * EB_TILE;
    int cnt = n - a < EB_TILE ? n - a : EB_TILE;
    for (int q = threadIdx.x; q < cnt + 2; q += blockDim.x) {
        int pos = a - 1 + q;
        k[q] = pos >= 0 && pos < n ? keys[pos] : EB_NONE;
    }
    for (int q = threadIdx.x; q < cnt; q += blockDim.x) r[q] = rows_sorted[a + q];
    __syncthreads();
    int j = blockIdx.y * blockDim.x + threadIdx.x;
    if (j >= dim) return;
    size_t d = (size_t)dim;
    int q = 0;
    while (q < cnt) {
        uint32_t id = k[q + 1];
        int start = q, end = q;
        while (end < cnt && k[end + 1] == id) end++;
        q = end;
        if (id >= (uint32_t)vocab) continue; // bad ids (sorted last), already reported
        bool from_before = start == 0 && k[0] == id;
        bool goes_after = end == cnt && k[cnt + 1] == id;
        if (!from_before && !goes_after) {
            size_t di = (size_t)id * d + (size_t)j;
            float acc = dtable[di];
            for (int p = start; p < end; p++)
                acc = __fadd_rn(acc, tfc_load<DT>(dout, (size_t)r[p] * d + (size_t)j));
            dtable[di] = acc;
        } else {
            float acc = tfc_load<DT>(dout, (size_t)r[start] * d + (size_t)j);
            for (int p = start + 1; p < end; p++)
                acc = __fadd_rn(acc, tfc_load<DT>(dout, (size_t)r[p] * d + (size_t)j));
            size_t slot = from_before ? 2 * (size_t)t : 2 * (size_t)t + 1;
            partial[slot * d + (size_t)j] = acc;
        }
    }
}

// Step 4: the run that starts in tile s and continues past it, if any.
__global__ void embedding_merge_kernel(const uint32_t *keys, int n, float *dtable, int vocab,
                                       int dim, const float *partial)
{
    int s = blockIdx.x;
    int a = s * EB_TILE;
    int b = n - a < EB_TILE ? n : a + EB_TILE;
    uint32_t id = keys[b - 1];
    if (id >= (uint32_t)vocab || b >= n || keys[b] != id) return; // nothing continues
    if (keys[a] == id && a > 0 && keys[a - 1] == id) return;      // started in an earlier tile
    int j = blockIdx.y * blockDim.x + threadIdx.x;
    if (j >= dim) return;
    size_t d = (size_t)dim;
    size_t di = (size_t)id * d + (size_t)j;
    float acc = __fadd_rn(dtable[di], partial[(2 * (size_t)s + 1) * d + (size_t)j]);
    for (int t = s + 1;; t++) {
        acc = __fadd_rn(acc, partial[2 * (size_t)t * d + (size_t)j]);
        long long bt = (long long)(t + 1) * EB_TILE;
        if (bt >= n || keys[bt] != id) break;
    }
    dtable[di] = acc;
}

size_t align_up(size_t x) { return (x + EB_ALIGN - 1) / EB_ALIGN * EB_ALIGN; }

// Keys are in [0, vocab] (vocab marks a bad id): the bits the sort needs.
int key_bits(int vocab)
{
    int bits = 1;
    while (bits < 32 && ((uint32_t)vocab >> bits) != 0) bits++;
    return bits;
}

// Bytes CUB wants to sort n pairs on the low `bits` key bits (0: cannot).
size_t sort_temp_bytes(int n, int bits)
{
    size_t bytes = 0;
    cudaError_t e = cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const uint32_t *)nullptr,
                                                    (uint32_t *)nullptr, (const uint32_t *)nullptr,
                                                    (uint32_t *)nullptr, n, 0, bits);
    return e == cudaSuccess ? bytes : 0;
}

struct bwd_layout {
    uint32_t *keys_in, *keys_out, *rows_in, *rows_out;
    float *partial;
    void *temp;
    size_t temp_bytes;
    size_t total;
};

// The workspace cut into its pieces (pointers from base; base NULL only sizes).
bool layout_of(void *base, int rows, int dim, int vocab, bwd_layout *l)
{
    size_t tiles = ((size_t)rows + EB_TILE - 1) / EB_TILE;
    size_t pairs = align_up((size_t)rows * sizeof(uint32_t));
    size_t part = align_up(2 * tiles * (size_t)dim * sizeof(float));
    size_t temp = sort_temp_bytes(rows, key_bits(vocab));
    if (!temp) return false;
    char *p = (char *)base;
    l->keys_in = (uint32_t *)p;
    l->keys_out = (uint32_t *)(p + pairs);
    l->rows_in = (uint32_t *)(p + 2 * pairs);
    l->rows_out = (uint32_t *)(p + 3 * pairs);
    l->partial = (float *)(p + 4 * pairs);
    l->temp = p + 4 * pairs + part;
    l->temp_bytes = temp;
    l->total = 4 * pairs + part + align_up(temp);
    return true;
}

template <int DT>
cudaError_t embedding_bwd_launch(cudaStream_t s, const int32_t *ids, int rows, const void *dout,
                                 float *dtable, int vocab, int dim, void *workspace,
                                 size_t workspace_bytes, tfc_id_check chk)
{
    bwd_layout l;
    if (!layout_of(workspace, rows, dim, vocab, &l) || l.total > workspace_bytes)
        return cudaErrorInvalidValue;
    TFCB_LAUNCH(embedding_keys_kernel, (unsigned)((rows + TFC_THREADS - 1) / TFC_THREADS),
                TFC_THREADS, 0, s)(ids, rows, vocab, l.keys_in, l.rows_in, chk);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    size_t temp = l.temp_bytes;
    e = cub::DeviceRadixSort::SortPairs(l.temp, temp, l.keys_in, l.keys_out, l.rows_in,
                                        l.rows_out, rows, 0, key_bits(vocab), s);
    if (e != cudaSuccess) return e;
    unsigned tiles = (unsigned)((rows + EB_TILE - 1) / EB_TILE);
    dim3 grid(tiles, (unsigned)((dim + EB_COLS - 1) / EB_COLS));
    TFCB_LAUNCH(embedding_tiles_kernel<DT>, grid, EB_COLS, 0, s)
        (l.keys_out, l.rows_out, rows, dout, dtable, vocab, dim, l.partial);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    TFCB_LAUNCH(embedding_merge_kernel, grid, EB_COLS, 0, s)
        (l.keys_out, rows, dtable, vocab, dim, l.partial);
    return cudaGetLastError();
}

} // namespace

extern "C" {

cudaError_t tfc_embedding_fwd(cudaStream_t s, const int32_t *ids, int rows, const float *table,
                              int vocab, int dim, void *out, bool accumulate, tf_dtype dt,
                              tfc_id_check check)
{
    if (rows < 1 || dim < 1) return cudaSuccess;
    TFC_DISPATCH_ACT(dt, embedding_fwd_launch, s, ids, rows, table, vocab, dim, out, accumulate,
                     check)
}

size_t tfc_embedding_bwd_workspace_bytes(int rows, int dim, int vocab)
{
    bwd_layout l;
    if (rows < 1 || dim < 1 || vocab < 1) return 0;
    return layout_of(nullptr, rows, dim, vocab, &l) ? l.total : 0;
}

cudaError_t tfc_embedding_bwd(cudaStream_t s, const int32_t *ids, int rows, const void *dout,
                              tf_dtype dt, float *dtable, int vocab, int dim, void *workspace,
                              size_t workspace_bytes, tfc_id_check check)
{
    if (rows < 1 || dim < 1) return cudaSuccess;
    TFC_DISPATCH_ACT(dt, embedding_bwd_launch, s, ids, rows, dout, dtable, vocab, dim, workspace,
                     workspace_bytes, check)
}

} // extern "C"
