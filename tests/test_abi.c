/* test_abi.c — pins the plugin ABI 1.0 layout. The _Static_asserts fail the
 * build if anyone reorders, removes or resizes a field of the descriptor or
 * of a 1.0 vtable slot (a change that needs ABI major 2); appending at the end
 * keeps them passing. Offsets are for LP64 (x86-64, aarch64). */
#include <check.h>
#include <stddef.h>
#include <stdlib.h>

#include "tfcore/tfcore.h"
#include "tfcore/dataset_fetch.h"

#define P sizeof(void *)

_Static_assert(sizeof(void *) == 8, "these offsets are for LP64 platforms");
_Static_assert(TF_PLUGIN_MAGIC == 0x31504654u, "magic is 'TFP1'");
_Static_assert(offsetof(tf_plugin, magic) == 0, "tf_plugin.magic");
_Static_assert(offsetof(tf_plugin, abi_major) == 4, "tf_plugin.abi_major");
_Static_assert(offsetof(tf_plugin, abi_minor) == 6, "tf_plugin.abi_minor");
_Static_assert(offsetof(tf_plugin, struct_size) == 8, "tf_plugin.struct_size");
_Static_assert(offsetof(tf_plugin, kind) == 12, "tf_plugin.kind");
_Static_assert(offsetof(tf_plugin, name) == 16, "tf_plugin.name");
_Static_assert(offsetof(tf_plugin, version) == 24, "tf_plugin.version");
_Static_assert(offsetof(tf_plugin, description) == 32, "tf_plugin.description");
_Static_assert(offsetof(tf_plugin, probe) == 40, "tf_plugin.probe");
_Static_assert(offsetof(tf_plugin, vtable) == 48, "tf_plugin.vtable");
_Static_assert(sizeof(tf_plugin) == 56, "tf_plugin size at ABI 1.0");

_Static_assert(TF_KIND_BACKEND == 1 && TF_KIND_MODEL == 2 && TF_KIND_DATASET == 3 &&
                   TF_KIND_COMM == 4 && TF_KIND_PRECISION == 5,
               "kind values");
_Static_assert(TF_DTYPE_F32 == 0 && TF_DTYPE_F16 == 1 && TF_DTYPE_BF16 == 2 && TF_DTYPE_I32 == 4,
               "dtype values");

/* Every vtable: uint32_t size, then pointers; slot i sits at 8 + i*8. */
#define SLOT_AT(type, field, i) _Static_assert(offsetof(type, field) == 8 + (i) * P, #type "." #field)

SLOT_AT(tf_backend_vtable, check_config, 0);
SLOT_AT(tf_backend_vtable, open, 1);
SLOT_AT(tf_backend_vtable, close, 2);
SLOT_AT(tf_backend_vtable, supports, 3);
SLOT_AT(tf_backend_vtable, mem_info, 4);
SLOT_AT(tf_backend_vtable, device_name, 5);
SLOT_AT(tf_backend_vtable, alloc, 6);
SLOT_AT(tf_backend_vtable, free, 7);
SLOT_AT(tf_backend_vtable, memcpy, 8);
SLOT_AT(tf_backend_vtable, memset, 9);
SLOT_AT(tf_backend_vtable, stream_create, 10);
SLOT_AT(tf_backend_vtable, stream_destroy, 11);
SLOT_AT(tf_backend_vtable, stream_sync, 12);
SLOT_AT(tf_backend_vtable, event_create, 13);
SLOT_AT(tf_backend_vtable, event_destroy, 14);
SLOT_AT(tf_backend_vtable, event_record, 15);
SLOT_AT(tf_backend_vtable, stream_wait_event, 16);
SLOT_AT(tf_backend_vtable, event_sync, 17);
SLOT_AT(tf_backend_vtable, gemm, 18);
SLOT_AT(tf_backend_vtable, sum_rows, 19);
SLOT_AT(tf_backend_vtable, layernorm_fwd, 20);
SLOT_AT(tf_backend_vtable, layernorm_bwd, 21);
SLOT_AT(tf_backend_vtable, attention_save_bytes, 22);
SLOT_AT(tf_backend_vtable, attention_fwd, 23);
SLOT_AT(tf_backend_vtable, attention_bwd, 24);
SLOT_AT(tf_backend_vtable, gelu_fwd, 25);
SLOT_AT(tf_backend_vtable, gelu_bwd, 26);
SLOT_AT(tf_backend_vtable, tanh_fwd, 27);
SLOT_AT(tf_backend_vtable, tanh_bwd, 28);
SLOT_AT(tf_backend_vtable, dropout_fwd, 29);
SLOT_AT(tf_backend_vtable, dropout_bwd, 30);
SLOT_AT(tf_backend_vtable, add, 31);
SLOT_AT(tf_backend_vtable, scale, 32);
SLOT_AT(tf_backend_vtable, cast, 33);
SLOT_AT(tf_backend_vtable, embedding_fwd, 34);
SLOT_AT(tf_backend_vtable, embedding_bwd, 35);
SLOT_AT(tf_backend_vtable, cross_entropy, 36);
SLOT_AT(tf_backend_vtable, adamw, 37);
SLOT_AT(tf_backend_vtable, sum_squares, 38);
SLOT_AT(tf_backend_vtable, finite_check, 39);
SLOT_AT(tf_backend_vtable, host_memory, 40);
SLOT_AT(tf_backend_vtable, native_stream, 41);
SLOT_AT(tf_backend_vtable, device_count, 42);
/* ABI 1.2 */
SLOT_AT(tf_backend_vtable, cross_entropy_ex, 43);
SLOT_AT(tf_backend_vtable, adamw_ex, 44);
_Static_assert(offsetof(tf_cross_entropy_desc, size) == 0, "tf_cross_entropy_desc.size");
_Static_assert(offsetof(tf_cross_entropy_desc, logits) == 8, "tf_cross_entropy_desc.logits");
_Static_assert(offsetof(tf_cross_entropy_desc, ld_logits) == 16, "tf_cross_entropy_desc.ld_logits");
_Static_assert(offsetof(tf_cross_entropy_desc, dt) == 24, "tf_cross_entropy_desc.dt");
_Static_assert(offsetof(tf_cross_entropy_desc, rows) == 28, "tf_cross_entropy_desc.rows");
_Static_assert(offsetof(tf_cross_entropy_desc, classes) == 32, "tf_cross_entropy_desc.classes");
_Static_assert(offsetof(tf_cross_entropy_desc, labels) == 40, "tf_cross_entropy_desc.labels");
_Static_assert(offsetof(tf_cross_entropy_desc, ignore_index) == 48, "tf_cross_entropy_desc.ignore_index");
_Static_assert(offsetof(tf_cross_entropy_desc, label_smoothing) == 52, "tf_cross_entropy_desc.label_smoothing");
_Static_assert(offsetof(tf_cross_entropy_desc, loss) == 56, "tf_cross_entropy_desc.loss");
_Static_assert(offsetof(tf_cross_entropy_desc, dlogits) == 64, "tf_cross_entropy_desc.dlogits");
_Static_assert(offsetof(tf_cross_entropy_desc, grad_scale) == 72, "tf_cross_entropy_desc.grad_scale");
_Static_assert(sizeof(tf_cross_entropy_desc) == 80, "tf_cross_entropy_desc size at ABI 1.2");
_Static_assert(offsetof(tf_adamw_hyper, step) == 16 && offsetof(tf_adamw_hyper, grad_scale) == 24 &&
                   sizeof(tf_adamw_hyper) == 32,
               "tf_adamw_hyper");
_Static_assert(offsetof(tf_adamw_desc, size) == 0 && offsetof(tf_adamw_desc, hyper) == 8 &&
                   offsetof(tf_adamw_desc, rule) == 40 && sizeof(tf_adamw_desc) == 48,
               "tf_adamw_desc at ABI 1.2");
/* tfcore/dataset_fetch.h: fields are appended only (size first) */
_Static_assert(offsetof(tf_dataset_source, size) == 0 && offsetof(tf_dataset_source, url) == 8 &&
                   offsetof(tf_dataset_source, sha256) == 16 && sizeof(tf_dataset_source) == 32,
               "tf_dataset_source");
_Static_assert(TF_ADAMW_TORCH == 0 && TF_ADAMW_HF == 1, "tf_adamw_rule values");
/* ABI 1.3 */
SLOT_AT(tf_backend_vtable, dropout_fwd_ex, 45);
SLOT_AT(tf_backend_vtable, attention_fwd_ex, 46);
SLOT_AT(tf_backend_vtable, attention_bwd_ex, 47);
_Static_assert(offsetof(tf_dropout_desc, size) == 0 && offsetof(tf_dropout_desc, x) == 8 &&
                   offsetof(tf_dropout_desc, y) == 16 && offsetof(tf_dropout_desc, keep) == 24 &&
                   offsetof(tf_dropout_desc, rows) == 32 && offsetof(tf_dropout_desc, row_elems) == 40 &&
                   offsetof(tf_dropout_desc, p) == 48 && offsetof(tf_dropout_desc, dt) == 52 &&
                   offsetof(tf_dropout_desc, seed) == 56 && offsetof(tf_dropout_desc, offset) == 64 &&
                   offsetof(tf_dropout_desc, row_first) == 72 && offsetof(tf_dropout_desc, row_stride) == 80 &&
                   sizeof(tf_dropout_desc) == 88,
               "tf_dropout_desc at ABI 1.3");
SLOT_AT(tf_backend_vtable, adafactor, 48);
_Static_assert(offsetof(tf_adafactor_tensor, offset) == 0 && offsetof(tf_adafactor_tensor, batch) == 8 &&
                   offsetof(tf_adafactor_tensor, rows) == 16 && offsetof(tf_adafactor_tensor, cols) == 24 &&
                   offsetof(tf_adafactor_tensor, factored) == 32 &&
                   offsetof(tf_adafactor_tensor, state_offset) == 40 &&
                   offsetof(tf_adafactor_tensor, weight_decay) == 48 && sizeof(tf_adafactor_tensor) == 56,
               "tf_adafactor_tensor at ABI 1.3");
_Static_assert(offsetof(tf_adafactor_desc, size) == 0 && offsetof(tf_adafactor_desc, lr) == 8 &&
                   offsetof(tf_adafactor_desc, eps) == 16 && offsetof(tf_adafactor_desc, clip_threshold) == 20 &&
                   offsetof(tf_adafactor_desc, decay_rate) == 24 && offsetof(tf_adafactor_desc, grad_scale) == 28 &&
                   offsetof(tf_adafactor_desc, step) == 32 && offsetof(tf_adafactor_desc, tensors) == 40 &&
                   offsetof(tf_adafactor_desc, ntensors) == 48 && offsetof(tf_adafactor_desc, workspace) == 56 &&
                   offsetof(tf_adafactor_desc, workspace_bytes) == 64 && sizeof(tf_adafactor_desc) == 72,
               "tf_adafactor_desc at ABI 1.3");
/* ABI 1.4 */
SLOT_AT(tf_backend_vtable, attention_varlen_fwd, 49);
SLOT_AT(tf_backend_vtable, attention_varlen_bwd, 50);
_Static_assert(sizeof(tf_attention_desc) == 48, "tf_attention_desc");
_Static_assert(offsetof(tf_attention_varlen_desc, size) == 0 && offsetof(tf_attention_varlen_desc, attn) == 8 &&
                   offsetof(tf_attention_varlen_desc, cu_seqlens) == 56 &&
                   offsetof(tf_attention_varlen_desc, row_first) == 64 &&
                   offsetof(tf_attention_varlen_desc, row_stride) == 72 && sizeof(tf_attention_varlen_desc) == 80,
               "tf_attention_varlen_desc at ABI 1.4");
/* ABI 1.5 */
SLOT_AT(tf_backend_vtable, dropout_varlen_fwd, 51);
_Static_assert(offsetof(tf_dropout_varlen_desc, size) == 0 && offsetof(tf_dropout_varlen_desc, drop) == 8 &&
                   offsetof(tf_dropout_varlen_desc, cu_seqlens) == 96 && sizeof(tf_dropout_varlen_desc) == 104,
               "tf_dropout_varlen_desc at ABI 1.5");

SLOT_AT(tf_model_vtable, check_config, 0);
SLOT_AT(tf_model_vtable, create, 1);
SLOT_AT(tf_model_vtable, destroy, 2);
SLOT_AT(tf_model_vtable, info, 3);
SLOT_AT(tf_model_vtable, params, 4);
SLOT_AT(tf_model_vtable, buffers, 5);
SLOT_AT(tf_model_vtable, zero_grad, 6);
SLOT_AT(tf_model_vtable, forward, 7);
SLOT_AT(tf_model_vtable, backward, 8);
SLOT_AT(tf_model_vtable, save, 9);
SLOT_AT(tf_model_vtable, reserve, 10);
SLOT_AT(tf_model_vtable, set_step, 11);
SLOT_AT(tf_model_vtable, read_loss, 12); /* 1.2 */
SLOT_AT(tf_model_vtable, set_rows, 13);  /* 1.3 */
SLOT_AT(tf_model_vtable, memory, 14);    /* 1.3 */
SLOT_AT(tf_model_vtable, stage_params, 15);   /* 1.4 */
SLOT_AT(tf_model_vtable, stage_forward, 16);  /* 1.4 */
SLOT_AT(tf_model_vtable, stage_backward, 17); /* 1.4 */
SLOT_AT(tf_model_vtable, keep_stage_grads, 18); /* 1.5 */
_Static_assert(offsetof(tf_model_memory, size) == 0 && offsetof(tf_model_memory, weights) == 8 &&
                   offsetof(tf_model_memory, gradients) == 16 && offsetof(tf_model_memory, activations) == 24 &&
                   sizeof(tf_model_memory) == 32,
               "tf_model_memory at ABI 1.3");
_Static_assert(offsetof(tf_model_create_args, max_seq) == 52, "tf_model_create_args.max_seq");
/* ABI 1.2 appended defer_loss and label_smoothing_factor; a model reads them
 * only when the args' size covers them */
_Static_assert(offsetof(tf_model_create_args, defer_loss) == 56, "tf_model_create_args.defer_loss");
_Static_assert(offsetof(tf_model_create_args, label_smoothing_factor) == 60,
               "tf_model_create_args.label_smoothing_factor");
/* ABI 1.3 appended gradient_checkpointing */
_Static_assert(offsetof(tf_model_create_args, gradient_checkpointing) == 64,
               "tf_model_create_args.gradient_checkpointing");
_Static_assert(sizeof(tf_model_create_args) == 72, "tf_model_create_args size at ABI 1.3");

/* The open/init arguments the core fills: 1.0's fields, then what ABI 1.4
 * appended (a plugin reads it only when the args' size covers it). */
_Static_assert(offsetof(tf_backend_open_args, size) == 0 && offsetof(tf_backend_open_args, device) == 4 &&
                   offsetof(tf_backend_open_args, threads) == 8 && offsetof(tf_backend_open_args, seed) == 16 &&
                   offsetof(tf_backend_open_args, section) == 24,
               "tf_backend_open_args at ABI 1.0");
_Static_assert(offsetof(tf_backend_open_args, local_world_size) == 32 && sizeof(tf_backend_open_args) == 40,
               "tf_backend_open_args.local_world_size at ABI 1.4");
_Static_assert(offsetof(tf_comm_init_args, size) == 0 && offsetof(tf_comm_init_args, section) == 8 &&
                   offsetof(tf_comm_init_args, rank) == 16 && offsetof(tf_comm_init_args, world_size) == 20 &&
                   offsetof(tf_comm_init_args, local_rank) == 24 && offsetof(tf_comm_init_args, backend) == 32 &&
                   offsetof(tf_comm_init_args, be) == 40 && offsetof(tf_comm_init_args, shared) == 48 &&
                   offsetof(tf_comm_init_args, local_world_size) == 56,
               "tf_comm_init_args before ABI 1.4");
_Static_assert(offsetof(tf_comm_init_args, timeout_s) == 64 && sizeof(tf_comm_init_args) == 72,
               "tf_comm_init_args.timeout_s at ABI 1.4");

SLOT_AT(tf_dataset_vtable, check_config, 0);
SLOT_AT(tf_dataset_vtable, open, 1);
SLOT_AT(tf_dataset_vtable, close, 2);
SLOT_AT(tf_dataset_vtable, num_rows, 3);
SLOT_AT(tf_dataset_vtable, seq_len, 4);
SLOT_AT(tf_dataset_vtable, fill_batch, 5);
SLOT_AT(tf_dataset_vtable, evaluate, 6);
SLOT_AT(tf_dataset_vtable, row_length, 7); /* 1.3 */

SLOT_AT(tf_comm_vtable, check_config, 0);
SLOT_AT(tf_comm_vtable, launch_mode, 1);
SLOT_AT(tf_comm_vtable, optimizer_on_root_only, 2);
SLOT_AT(tf_comm_vtable, init, 3);
SLOT_AT(tf_comm_vtable, finalize, 4);
SLOT_AT(tf_comm_vtable, allreduce_start, 5);
SLOT_AT(tf_comm_vtable, wait, 6);
SLOT_AT(tf_comm_vtable, reduce, 7);
SLOT_AT(tf_comm_vtable, broadcast, 8);
SLOT_AT(tf_comm_vtable, barrier, 9);
SLOT_AT(tf_comm_vtable, abort, 10);
SLOT_AT(tf_comm_vtable, reduce_scatter, 11); /* 1.4 */
SLOT_AT(tf_comm_vtable, all_gather, 12);     /* 1.4 */
SLOT_AT(tf_comm_vtable, send, 13);           /* 1.4 */
SLOT_AT(tf_comm_vtable, recv, 14);           /* 1.4 */
SLOT_AT(tf_comm_vtable, reduce_start, 15);   /* 1.5 */

SLOT_AT(tf_precision_vtable, check_config, 0);
SLOT_AT(tf_precision_vtable, create, 1);
SLOT_AT(tf_precision_vtable, destroy, 2);
SLOT_AT(tf_precision_vtable, compute_dtype, 3);
SLOT_AT(tf_precision_vtable, matmul_mode, 4);
SLOT_AT(tf_precision_vtable, loss_scale, 5);
SLOT_AT(tf_precision_vtable, unscale_and_check, 6);
SLOT_AT(tf_precision_vtable, update, 7);
SLOT_AT(tf_precision_vtable, get_state, 8);
SLOT_AT(tf_precision_vtable, set_state, 9);

/* TF_HAS: a vtable built against an older, shorter layout ends before a
 * later slot, and the macro must say so without reading past its size. */
typedef struct grown_vtable {
    uint32_t size;
    void (*old_slot)(void);
    void (*new_slot)(void); /* "added in 1.1" */
} grown_vtable;
static void some_fn(void) {}

START_TEST(test_tf_has_size_guard)
{
    grown_vtable full = {sizeof(grown_vtable), some_fn, some_fn};
    grown_vtable old = {offsetof(grown_vtable, new_slot), some_fn, some_fn};
    grown_vtable unset = {sizeof(grown_vtable), some_fn, NULL};
    const grown_vtable *p = &full;
    ck_assert(TF_HAS(p, new_slot));
    p = &old;
    ck_assert(TF_HAS(p, old_slot));
    ck_assert(!TF_HAS(p, new_slot));
    p = &unset;
    ck_assert(!TF_HAS(p, new_slot));
    p = NULL;
    ck_assert(!TF_HAS(p, old_slot));
}
END_TEST

START_TEST(test_kind_names)
{
    ck_assert_str_eq(tf_kind_name(TF_KIND_BACKEND), "backend");
    ck_assert_str_eq(tf_kind_name(TF_KIND_PRECISION), "precision");
    ck_assert_ptr_null(tf_kind_name(0));
    ck_assert_ptr_null(tf_kind_name(6));
    ck_assert_uint_eq(tf_kind_from_name("comm"), TF_KIND_COMM);
    ck_assert_uint_eq(tf_kind_from_name("comms"), 0);
}
END_TEST

START_TEST(test_dtype_conversions)
{
    ck_assert_uint_eq(tf_dtype_size(TF_DTYPE_BF16), 2);
    ck_assert_uint_eq(tf_dtype_size(TF_DTYPE_I64), 8);
    ck_assert_str_eq(tf_dtype_name(TF_DTYPE_F8_E4M3), "F8_E4M3");
    ck_assert_int_eq(tf_dtype_from_name("BOOL"), TF_DTYPE_BOOL);
    ck_assert_int_eq(tf_dtype_from_name("F128"), -1);
    /* exact values and round-to-nearest-even at the halfway points */
    ck_assert_uint_eq(tf_f32_to_f16(1.0f), 0x3c00);
    ck_assert_uint_eq(tf_f32_to_f16(-2.0f), 0xc000);
    ck_assert_uint_eq(tf_f32_to_f16(65504.0f), 0x7bff);
    ck_assert_uint_eq(tf_f32_to_f16(65520.0f), 0x7c00); /* rounds up to inf */
    ck_assert_uint_eq(tf_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00); /* tie -> even */
    ck_assert_uint_eq(tf_f32_to_f16(1.0f + 3.0f / 2048), 0x3c02); /* tie -> even (up) */
    ck_assert_uint_eq(tf_f32_to_f16(5.960464477539063e-08f), 0x0001); /* smallest subnormal */
    ck_assert(tf_f16_to_f32(0x0001) == 5.960464477539063e-08f);
    ck_assert(tf_f16_to_f32(0x3555) == 0.333251953125f);
    ck_assert_uint_eq(tf_f32_to_bf16(1.0f), 0x3f80);
    ck_assert_uint_eq(tf_f32_to_bf16(1.00390625f), 0x3f80);  /* tie -> even */
    ck_assert_uint_eq(tf_f32_to_bf16(1.01171875f), 0x3f82);  /* tie -> even (up) */
    ck_assert(tf_bf16_to_f32(0xc0a0) == -5.0f);
    /* every f16 value survives f16 -> f32 -> f16 */
    for (unsigned h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaN payloads */
        ck_assert_uint_eq(tf_f32_to_f16(tf_f16_to_f32((unsigned short)h)), h);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("abi");
    TCase *tc = tcase_create("layout");
    tcase_add_test(tc, test_tf_has_size_guard);
    tcase_add_test(tc, test_kind_names);
    tcase_add_test(tc, test_dtype_conversions);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
