/*
 * C ABI of libautojudge_host: the host core (the same accept_core.h rule the CUDA kernels run),
 * for ctypes (trtllm_autojudge/ops/host_library.py) and the CPU path of torch.ops.autojudge.accept.
 * Every function returns 0 on success, or AUTOJUDGE_HOST_INVALID_ARGUMENT when a size, a dtype code
 * or a pointer is invalid (then nothing is written). Arrays are dense row-major; shapes use
 * B = batch_size, N = num_draft_nodes, P = num_paths, D + 1 = max_path_len, R = num_rows,
 * V = vocab_size, S = num_sequences, T = num_tokens. dtype codes: 0 float32, 1 float16, 2 bfloat16.
 */
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C"
{
#endif

#define AUTOJUDGE_HOST_OK 0
#define AUTOJUDGE_HOST_INVALID_ARGUMENT 1
//! Logits mode: the sequences' tokens (host_request_types, host_context_lengths) do not add up to the
//! step's input_ids; nothing is written (the plugin refuses such a step the same way).
#define AUTOJUDGE_HOST_STEP_MISMATCH 2
//! Bumped whenever a signature below changes; the Python binding refuses a library of another ABI.
#define AUTOJUDGE_HOST_ABI_VERSION 2

int32_t autojudge_host_abi_version(void);

//! Per row: the target argmax (first maximum, NaN above numbers) and the judge logit
//! bias + weight . features, accumulated in float32 in feature order. Features: target_hidden for
//! feature_setup 0 (DT); draft_hidden then target_hidden for feature_setup 1 (DD-DT).
int32_t autojudge_host_score_rows(int32_t num_rows, int32_t vocab_size,
    int32_t logits_dtype, void const* target_logits,      /* [R, V] */
    int32_t hidden_dtype, void const* target_hidden,      /* [R, Ht] */
    int32_t target_hidden_size, void const* draft_hidden, /* [R, Hd] or NULL for DT */
    int32_t draft_hidden_size, int32_t feature_setup,
    float const* judge_weight,                            /* [F] F = Hd + Ht (DD-DT) or Ht (DT) */
    float judge_bias,
    int32_t* target_argmax,                               /* [R] out */
    float* judge_logit);                                  /* [R] out */

//! Accept mode given the target argmax and judge logits of every node (node n of sequence b at
//! b * (N + 1) + n). judge_logit == NULL is the lossless rule (exact matches only).
int32_t autojudge_host_accept_tree(int32_t batch_size, int32_t num_draft_nodes, int32_t num_paths,
    int32_t max_path_len,
    int32_t const* draft_tokens,  /* [B, N] */
    int32_t const* target_argmax, /* [B, N + 1] */
    int32_t const* paths,         /* [B, P, D + 1] */
    float const* judge_logit,     /* [B, N + 1] or NULL */
    float const* threshold,       /* [B] (ignored when judge_logit is NULL) */
    int32_t const* draft_lens,    /* [B] */
    int32_t* accepted_tokens,     /* [B, D + 1] out */
    int32_t* accepted_lens,       /* [B] out */
    int32_t* best_path,           /* [B] out */
    int32_t* judged_count);       /* [B] out */

//! Logits mode, the segmentation of a packed TensorRT-LLM step: per sequence s, its first logits row and
//! its draft count K (rows - 1), or -1 when its rows do not match its tokens (never rewritten).
//! Tokens per sequence: host_context_lengths[s] for a context request (request type 0), 1 otherwise.
int32_t autojudge_host_segment_step(int32_t num_rows,
    int32_t const* last_token_ids,      /* [R] 1-based positions in input_ids */
    int32_t num_tokens,                 /* T */
    int32_t num_sequences,
    int32_t const* request_types,       /* [S] host_request_types */
    int32_t const* host_context_lengths,/* [S] */
    int32_t* first_row,                 /* [S] out */
    int32_t* num_drafts);               /* [S] out, -1 refused */

//! Logits mode given the target argmax and judge logits of every gathered row: copies the logits
//! to rewritten_logits, then, in each row whose draft child the judge accepts, makes the draft
//! token the strict argmax (plugins/README.md, "Logits mode").
int32_t autojudge_host_rewrite_logits(int32_t num_rows, int32_t vocab_size, int32_t logits_dtype,
    void const* target_logits,          /* [R, V] */
    int32_t const* target_argmax,       /* [R] */
    float const* judge_logit,           /* [R] */
    int32_t num_tokens, int32_t const* input_ids, /* [T] */
    int32_t const* last_token_ids,      /* [R] 1-based positions in input_ids */
    int32_t num_sequences,
    int32_t const* request_types,       /* [S] host_request_types */
    int32_t const* host_context_lengths,/* [S] */
    float threshold,
    void* rewritten_logits);            /* [R, V] out */

#ifdef __cplusplus
}
#endif
