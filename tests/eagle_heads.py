"""EAGLE heads for CPU tests: a random one, and one that drafts like the target's first layer.

``first_layer_head`` copies the target's first decoder layer into the head's second layer, makes the
first an identity (zero attention and MLP outputs) and fc pass the token embedding through: the
head then computes the target's first layer over the context tokens (all but the prompt's first),
so it drafts about as well as the one-layer draft of ``tiny_models.tiny_pair`` (its final norm
has unit weights, which leave the argmax of the LM head unchanged).
"""
import torch

from trtllm_autojudge.models.eagle_head import EagleHead, EagleHeadConfig, random_eagle_head


def first_layer_head(target) -> EagleHead:
    model = target.model
    head = EagleHead(EagleHeadConfig.like_target(model.config, num_layers=2), {"target_model": target.name})
    H = head.config.hidden_size
    with torch.no_grad():
        for p in head.parameters():
            p.zero_()
        head.embed_tokens.weight.copy_(model.get_input_embeddings().weight)
        head.fc.weight[:, :H] = torch.eye(H)
        head.layers[1].load_state_dict(model.model.layers[0].state_dict())
        head.layers[0].post_attention_layernorm.weight.fill_(1.0)
    return head.to(next(model.parameters()).dtype).eval()


__all__ = ["first_layer_head", "random_eagle_head"]
