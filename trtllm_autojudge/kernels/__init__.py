"""CPU kernels the models run on: bf16 linears packed for oneDNN (:mod:`.cpu_linear`) and their sibling
projections fused (:mod:`.sibling_linear`), the float32 row-invariant kernel (:mod:`.row_linear`),
grouped-query attention that reads the KV cache in place (:mod:`.gqa_attention`), per-row KV caches
for packed forwards (:mod:`.row_cache`), and the memory-bandwidth bound of a decode step
(:mod:`.roofline`). Nothing here imports the rest of the package."""
