/* cub/device/device_radix_sort.cuh — the test-only CUDA emulation's stand-in
 * (see cuda_runtime.h) for the one CUB call backend-cuda makes:
 * cub::DeviceRadixSort::SortPairs. CUB's protocol: with d_temp_storage NULL
 * it only stores the temporary storage size it needs; otherwise it enqueues
 * on `stream` a stable sort of the (key, value) pairs by the key bits
 * [begin_bit, end_bit), keys and values written to the out arrays. The
 * emulation's sort uses the temporary storage for its scratch (so a too
 * small one is an error, as in CUB), and checks every array is device
 * memory large enough. */
#ifndef TF_CUDA_EMU_CUB_DEVICE_RADIX_SORT_CUH
#define TF_CUDA_EMU_CUB_DEVICE_RADIX_SORT_CUH

#include <stddef.h>
#include <string.h>

#include <algorithm>
#include <type_traits>

#include "cuda_runtime.h"
#include "emu.h"

namespace cub {
struct DeviceRadixSort {
    template <class K, class V> struct sort_task {
        const K *kin;
        K *kout;
        const V *vin;
        V *vout;
        size_t n;
        int begin, end;
        size_t *idx; /* [n] scratch in the temporary storage */
        static cudaError_t run(void *p)
        {
            sort_task *t = (sort_task *)p;
            using U = typename std::make_unsigned<K>::type;
            U mask = t->end - t->begin >= (int)(8 * sizeof(K)) ? (U)~(U)0
                                                               : (U)(((U)1 << (t->end - t->begin)) - 1);
            for (size_t i = 0; i < t->n; i++) t->idx[i] = i;
            auto key = [&](size_t i) { return (U)(((U)t->kin[i] >> t->begin) & mask); };
            std::stable_sort(t->idx, t->idx + t->n, [&](size_t a, size_t b) { return key(a) < key(b); });
            /* the inputs may be read while writing: CUB's out arrays do not
             * alias its in arrays, but stage anyway through the scratch */
            K *ks = (K *)(t->idx + t->n);
            V *vs = (V *)(ks + t->n);
            for (size_t i = 0; i < t->n; i++) {
                ks[i] = t->kin[t->idx[i]];
                vs[i] = t->vin[t->idx[i]];
            }
            memcpy(t->kout, ks, t->n * sizeof(K));
            memcpy(t->vout, vs, t->n * sizeof(V));
            return cudaSuccess;
        }
        static void destroy(void *p) { delete (sort_task *)p; }
    };

    template <class K, class V, class N>
    static cudaError_t SortPairs(void *d_temp_storage, size_t &temp_storage_bytes, const K *d_keys_in,
                                 K *d_keys_out, const V *d_values_in, V *d_values_out, N num_items,
                                 int begin_bit = 0, int end_bit = (int)(sizeof(K) * 8),
                                 cudaStream_t stream = 0)
    {
        static_assert(std::is_integral<K>::value, "the stand-in sorts integer keys");
        if (num_items < 0 || begin_bit < 0 || end_bit > (int)(8 * sizeof(K)) || begin_bit > end_bit)
            return cudaErrorInvalidValue;
        size_t n = (size_t)num_items;
        size_t need = n * (sizeof(size_t) + sizeof(K) + sizeof(V) + 8) + 256;
        if (!d_temp_storage) {
            temp_storage_bytes = need;
            return cudaSuccess;
        }
        if (temp_storage_bytes < need) return cudaErrorInvalidValue;
        if (n == 0) return cudaSuccess;
        int dev = emu_stream_device(stream);
        if (dev < 0) return cudaErrorInvalidResourceHandle;
        if (!emu_is_device_span(d_temp_storage, need, dev) ||
            !emu_is_device_span(d_keys_in, n * sizeof(K), dev) ||
            !emu_is_device_span(d_keys_out, n * sizeof(K), dev) ||
            !emu_is_device_span(d_values_in, n * sizeof(V), dev) ||
            !emu_is_device_span(d_values_out, n * sizeof(V), dev))
            return cudaErrorInvalidValue;
        size_t *idx = (size_t *)(((uintptr_t)d_temp_storage + 7) & ~(uintptr_t)7);
        auto *t = new sort_task<K, V>{d_keys_in, d_keys_out, d_values_in, d_values_out, n,
                                      begin_bit,  end_bit,    idx};
        return emu_enqueue(stream, sort_task<K, V>::run, t, sort_task<K, V>::destroy);
    }
};
} // namespace cub

#endif
