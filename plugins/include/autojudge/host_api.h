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
#define AUTOJUDGE_HOST_ABI_VERSION 5

int32_t autojudge_host_abi_version(void);

//! The vocabulary of the compiled judge (accept_core.h FeatureBlock; trtllm_autojudge/spec/judge_blocks.py
//! holds the same): the name of feature block `code` (NULL for an unknown code), and the draft tokens a
//! node needs after it for that block (-1 for an unknown code).
char const* autojudge_host_feature_block_name(int32_t code);
int32_t autojudge_host_feature_block_window(int32_t code);

//! Judge arguments shared below: the judge reads feature_blocks ([num_blocks] FeatureBlock codes, in
//! the order of its weights) with judge_logit = judge_bias + judge_weight . features, accumulated in
//! float32. draft_hidden may be NULL unless a block reads the draft (DD, DD1). Per row: the target
//! argmax (first maximum, NaN above numbers); a judge logit only at the nodes the rule scores,
//! +inf at every other node. min_run is the judge's minimum run (accept_core.h "minimum run"; 1 =
//! none, < 1 is an invalid argument): a mismatching node whose exact run is shorter is neither
//! scored nor judged.

//! Accept mode, the scoring of kernel 2 before its path walk (node n of sequence b at row
//! b * (N + 1) + n): the judge logit of each node that mismatches the target argmax of its parent on
//! some path row within draft_lens, whose exact run reaches min_run, and that has the draft tokens its
//! blocks need after it (c1 =
//! greedy_child[b, n], c2 = greedy_child[b, c1]; an entry outside [1, draft_lens[b]] is none).
//! greedy_child may be NULL when no block looks ahead (DT, DD only).
int32_t autojudge_host_judge_nodes(int32_t batch_size, int32_t num_draft_nodes, int32_t vocab_size,
    int32_t logits_dtype, void const* target_logits,      /* [B * (N + 1), V] */
    int32_t hidden_dtype, void const* target_hidden,      /* [B * (N + 1), Ht] */
    int32_t target_hidden_size, void const* draft_hidden, /* [B * (N + 1), Hd] or NULL */
    int32_t draft_hidden_size, int32_t num_blocks,
    int32_t const* feature_blocks,                        /* [num_blocks] */
    float const* judge_weight,                            /* [F] */
    float judge_bias,
    int32_t const* draft_tokens,                          /* [B, N] */
    int32_t num_paths, int32_t max_path_len,
    int32_t const* paths,                                 /* [B, P, D + 1] */
    int32_t const* draft_lens,                            /* [B] */
    int32_t const* greedy_child,                          /* [B, N + 1] or NULL */
    int32_t min_run,
    int32_t* target_argmax,                               /* [B, N + 1] out */
    float* judge_logit);                                  /* [B, N + 1] out */

//! Accept mode given the target argmax and judge logits of every node (node n of sequence b at
//! b * (N + 1) + n). judge_logit == NULL is the lossless rule (exact matches only); otherwise a
//! mismatching node is judged when its logit passes the threshold and its exact run reaches min_run.
int32_t autojudge_host_accept_tree(int32_t batch_size, int32_t num_draft_nodes, int32_t num_paths,
    int32_t max_path_len,
    int32_t const* draft_tokens,  /* [B, N] */
    int32_t const* target_argmax, /* [B, N + 1] */
    int32_t const* paths,         /* [B, P, D + 1] */
    float const* judge_logit,     /* [B, N + 1] or NULL */
    float const* threshold,       /* [B] (ignored when judge_logit is NULL) */
    int32_t const* draft_lens,    /* [B] */
    int32_t min_run,
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

//! Logits mode, the scoring of kernel 2 on a packed step (segmented as autojudge_host_segment_step):
//! the judge logit of each draft row of a sequence whose token (input_ids[last_token_ids[row] - 1])
//! mismatches the target argmax of the row before it, whose exact run (through the sequence's next
//! draft rows) reaches min_run, and that has the draft tokens its blocks need after it (its c1 and c2
//! are the sequence's next draft rows).
int32_t autojudge_host_judge_rows(int32_t num_rows, int32_t vocab_size, int32_t logits_dtype,
    void const* target_logits,          /* [R, V] */
    int32_t hidden_dtype, void const* target_hidden, /* [R, Ht] */
    int32_t target_hidden_size, void const* draft_hidden, /* [R, Hd] or NULL */
    int32_t draft_hidden_size, int32_t num_blocks,
    int32_t const* feature_blocks,      /* [num_blocks] */
    float const* judge_weight,          /* [F] */
    float judge_bias, int32_t num_tokens,
    int32_t const* input_ids,           /* [T] */
    int32_t const* last_token_ids,      /* [R] 1-based positions in input_ids */
    int32_t num_sequences,
    int32_t const* request_types,       /* [S] host_request_types */
    int32_t const* host_context_lengths,/* [S] */
    int32_t min_run,
    int32_t* target_argmax,             /* [R] out */
    float* judge_logit);                /* [R] out */

//! Logits mode given the target argmax and judge logits of every gathered row: copies the logits
//! to rewritten_logits, then, in each row whose draft child the judge accepts (its logit passes the
//! threshold and its exact run reaches min_run), makes the draft token the strict argmax
//! (plugins/README.md, "Logits mode").
int32_t autojudge_host_rewrite_logits(int32_t num_rows, int32_t vocab_size, int32_t logits_dtype,
    void const* target_logits,          /* [R, V] */
    int32_t const* target_argmax,       /* [R] */
    float const* judge_logit,           /* [R] */
    int32_t num_tokens, int32_t const* input_ids, /* [T] */
    int32_t const* last_token_ids,      /* [R] 1-based positions in input_ids */
    int32_t num_sequences,
    int32_t const* request_types,       /* [S] host_request_types */
    int32_t const* host_context_lengths,/* [S] */
    float threshold, int32_t min_run,
    void* rewritten_logits);            /* [R, V] out */

//! Tree logits mode, the segmentation of one EAGLE engine step (accept_core.h, spec/tree_step.py): per
//! request its first logits row and whether it is refused (1: its path rows are not one tree of nodes
//! 1..draft_lens[b], or two children of one node carry the same token). AUTOJUDGE_HOST_STEP_MISMATCH
//! when a draft length lies outside [0, N] or the rows (draft_lens + 1 each) do not add up to num_rows.
int32_t autojudge_host_segment_tree_step(int32_t num_rows, int32_t batch_size, int32_t num_draft_nodes,
    int32_t const* draft_tokens,        /* [B, N] */
    int32_t const* draft_lens,          /* [B] */
    int32_t num_paths, int32_t max_path_len,
    int32_t const* paths,               /* [B, P, D + 1] */
    int32_t* first_row,                 /* [B] out */
    int32_t* refused);                  /* [B] out, 1 refused */

//! Tree logits mode, the scoring: the target argmax of every row and the judge logit of every node of
//! a request that is not refused that mismatches its parent on a path row, whose exact run reaches
//! min_run, and that has the draft tokens its blocks need after it (greedy_child as in accept mode; NULL when no block looks ahead); +inf at every
//! other row. No block may read the draft (the EAGLE engine has no draft model).
int32_t autojudge_host_judge_tree_rows(int32_t num_rows, int32_t vocab_size, int32_t logits_dtype,
    void const* target_logits,          /* [R, V] */
    int32_t hidden_dtype, void const* target_hidden, /* [R, Ht] */
    int32_t target_hidden_size, void const* draft_hidden, /* NULL */
    int32_t draft_hidden_size, int32_t num_blocks,
    int32_t const* feature_blocks,      /* [num_blocks] */
    float const* judge_weight,          /* [F] */
    float judge_bias, int32_t batch_size, int32_t num_draft_nodes,
    int32_t const* draft_tokens,        /* [B, N] */
    int32_t const* draft_lens,          /* [B] */
    int32_t num_paths, int32_t max_path_len,
    int32_t const* paths,               /* [B, P, D + 1] */
    int32_t const* greedy_child,        /* [B, N + 1] or NULL */
    int32_t min_run,
    int32_t* target_argmax,             /* [R] out */
    float* judge_logit);                /* [R] out */

//! Tree logits mode given the target argmax and judge logits of every row: copies the logits to
//! rewritten_logits, then per request that is not refused walks its paths with the judge and, for every
//! judged node (exact run >= min_run) on the best path's accepted prefix, makes the node's token its parent row's strict argmax.
int32_t autojudge_host_rewrite_tree_logits(int32_t num_rows, int32_t vocab_size, int32_t logits_dtype,
    void const* target_logits,          /* [R, V] */
    int32_t const* target_argmax,       /* [R] */
    float const* judge_logit,           /* [R] */
    int32_t batch_size, int32_t num_draft_nodes,
    int32_t const* draft_tokens,        /* [B, N] */
    int32_t const* draft_lens,          /* [B] */
    int32_t num_paths, int32_t max_path_len,
    int32_t const* paths,               /* [B, P, D + 1] */
    float const* threshold,             /* [B] */
    int32_t min_run,
    void* rewritten_logits);            /* [R, V] out */

#ifdef __cplusplus
}
#endif
