"""torchtitan's own models for the GPU step (issue "torchtitan, for real"), as `e2e_step.py --titan FLAVOR` builds
them: its Llama3 (graph_trainer's model code on torchtitan 0.3, `models.llama3` on 0.2) and its DeepSeek-V3 with
experts over every rank (0.2), under its SimpleFSDP; the stubs and patches each needs on the machines that run them.
"""

from __future__ import annotations

STUBBED = ("datasets", "tensorboard", "torchdata", "tokenizers", "huggingface_hub", "wandb", "pyarrow", "boto3",
           "tiktoken", "blobfile", "sentencepiece", "fsspec", "pandas", "PIL")


def stub_missing(roots: tuple[str, ...] = STUBBED) -> None:
    """Empty modules for torchtitan's data-loading and logging imports a GPU host lacks (its model code, SimpleFSDP
    and passes do not use them): installed last on the import path, so a package that is there is the real one."""
    import importlib.abc
    import importlib.machinery
    import sys
    import types

    class Stub(types.ModuleType):
        __path__: list = []

        def __getattr__(self, name):  # a plain class: torchtitan subclasses some beside its own ABCs
            if name.startswith("__"):
                raise AttributeError(name)
            return type(name, (), {})

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in roots:
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            return None

        def create_module(self, spec):
            return Stub(spec.name)

        def exec_module(self, module):
            module.__path__ = []

    sys.meta_path.append(Finder())
    try:  # torch's own TensorBoard writer checks the package's version: stubbed as a whole where that fails
        import torch.utils.tensorboard  # noqa: F401
    except ImportError:
        sys.modules["torch.utils.tensorboard"] = Stub("torch.utils.tensorboard")


def build_titan(flavor: str, layers: int, seq: int, world: int, device: str) -> tuple:
    """torchtitan's own Llama3 (graph_trainer's model code, `flavor`'s widths, the first `layers` blocks, SDPA
    attention) under torchtitan's SimpleFSDP over `world` ranks (bf16 parameters, fp32 reductions), and the step's
    input: fixed tokens (the loss is the logits' mean square, as for this file's decoder)."""
    import dataclasses
    from unittest.mock import patch

    import torch

    stub_missing()
    import importlib.util

    if flavor.startswith("dsv3-"):  # torchtitan 0.2's DeepSeek-V3 (the GPU hosts' release)
        return _build_titan_dsv3_02(flavor.removeprefix("dsv3-"), layers, seq, world, device)
    if importlib.util.find_spec("torchtitan.experiments.graph_trainer") is None:  # torchtitan 0.2: no graph_trainer
        return _build_titan_02(flavor, layers, seq, world, device)
    import torch.distributed.fsdp as fsdp

    if not hasattr(fsdp, "DataParallelMeshDims"):  # torch < 2.13: only FSDP2's full-DTensor path reads it, which
        @dataclasses.dataclass  # SimpleFSDP does not take; a placeholder lets torchtitan's modules import
        class DataParallelMeshDims:
            shard: object = None
            replicate: object = None

        fsdp.DataParallelMeshDims = DataParallelMeshDims
    from torchtitan.config.configs import TrainingConfig
    from torchtitan.distributed import ParallelDims
    from torchtitan.distributed.utils import set_spmd_backend
    from torchtitan.experiments.graph_trainer.common_utils import apply_simple_fsdp
    from torchtitan.experiments.graph_trainer.llama3 import model_registry

    set_spmd_backend("partial_dtensor")
    cfg = model_registry(flavor, attn_backend="sdpa").model
    cfg = dataclasses.replace(cfg, layers=list(cfg.layers)[:layers])
    with torch.device("meta"):
        model = cfg.build()
    model.to_empty(device=device)
    model.init_weights()
    with patch("torchtitan.distributed.parallel_dims.device_type", device.split(":")[0]):
        dims = ParallelDims(dp_replicate=1, dp_shard=world, cp=1, tp=1, pp=1, ep=1, world_size=world,
                            spmd_backend="partial_dtensor")
        model = apply_simple_fsdp(model, parallel_dims=dims, training=TrainingConfig(
            mixed_precision_param="bfloat16" if device != "cpu" else "float32", mixed_precision_reduce="float32"))
    return model, _tokens(cfg.vocab_size, seq, device)


def _build_titan_02(flavor: str, layers: int, seq: int, world: int, device: str) -> tuple:
    """The same step on torchtitan 0.2 (the newest that imports with torch 2.11): its Llama3 model code
    (`torchtitan.models.llama3`) under its SimpleFSDP (`experiments/simple_fsdp`, `data_parallel` in
    `fully_shard` mode over a 1-D mesh, bf16 parameters and fp32 reductions on GPU), as its `parallelize_llama`
    applies it without TP, AC or compile (this file compiles)."""
    import dataclasses

    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torchtitan.experiments.simple_fsdp.simple_fsdp import MixedPrecisionPolicy, data_parallel
    from torchtitan.models.llama3 import Transformer, llama3_args

    args = dataclasses.replace(llama3_args[flavor], n_layers=layers, max_seq_len=seq)
    with torch.device("meta"):
        model = Transformer(args)
    model.to_empty(device=device)
    with torch.no_grad():
        model.init_weights(buffer_device=torch.device(device))
    mesh = init_device_mesh(device.split(":")[0], (world,), mesh_dim_names=("fsdp",))
    gpu = device != "cpu"
    model = data_parallel(model, mesh, mode="fully_shard", mp_policy=MixedPrecisionPolicy(
        param_dtype=torch.bfloat16 if gpu else torch.float32, reduce_dtype=torch.float32))
    return model, _tokens(args.vocab_size, seq, device)


def _build_titan_dsv3_02(flavor: str, layers: int, seq: int, world: int, device: str) -> tuple:
    """torchtitan 0.2's DeepSeek-V3 (`flavor`'s widths, the first `layers` blocks, SDPA attention with a causal
    mask) as its SimpleFSDP experiment parallelizes it without TP, AC or compile: experts over an expert-parallel
    group of all `world` ranks (`apply_moe_ep_tp`: all_to_all dispatch and combine), the experts' FSDP over the
    `efsdp` mesh, the rest over `fsdp` (bf16 parameters, fp32 reductions on GPU). Routed sizes are data: Dynamo
    captures them as scalars, as torchtitan's compile path sets."""
    import dataclasses
    from unittest.mock import patch

    import torch
    from torchtitan.distributed import ParallelDims
    from torchtitan.experiments.simple_fsdp.simple_fsdp import MixedPrecisionPolicy, data_parallel
    from torchtitan.models.deepseek_v3 import DeepSeekV3Model, deepseekv3_args
    from torchtitan.models.llama4.infra.parallelize import apply_moe_ep_tp

    gpu = device != "cpu"
    base = deepseekv3_args[flavor]
    args = dataclasses.replace(base, n_layers=layers, max_seq_len=seq, attn_type="sdpa", attn_mask_type="causal",
                               moe_args=dataclasses.replace(base.moe_args, use_grouped_mm=gpu))
    args.moe_impl = "standard"  # what update_from_config sets from the job config's default (no DeepEP)
    with torch.device("meta"):
        model = DeepSeekV3Model(args)
    model.to_empty(device=device)
    with torch.no_grad():
        model.init_weights(buffer_device=torch.device(device))
    with patch("torchtitan.distributed.parallel_dims.device_type", device.split(":")[0]):
        dims = ParallelDims(dp_replicate=1, dp_shard=world, cp=1, tp=1, pp=1, ep=world, etp=1, world_size=world)
        dims.build_mesh()
    apply_moe_ep_tp(model, tp_mesh=None, ep_mesh=dims.get_optional_mesh("ep"), etp_mesh=None, ep_etp_mesh=None)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if gpu else torch.float32, reduce_dtype=torch.float32)
    edp = dims.get_optional_mesh(["efsdp"])
    for block in model.layers.values():
        if block.moe_enabled:
            dim0 = 1 if edp["efsdp"].size() * world > block.moe.experts.num_experts else 0
            block.moe.experts = data_parallel(block.moe.experts, edp, "fully_shard", mp_policy=mp, shard_dim=dim0)
    model = data_parallel(model, dims.get_mesh(["fsdp"]), "fully_shard", mp_policy=mp)
    torch._dynamo.config.capture_scalar_outputs = True
    if gpu:
        import torch._inductor.config as icfg

        icfg.post_grad_custom_pre_pass = blocking_host_copies
    else:  # the dry run only: the router counts tokens with histc, which CPU torch lacks for integers, and
        import functools  # the dispatch permutes them with a Triton kernel, whose CPU version loops on .item()

        import torchtitan.models.moe.kernels as moe_kernels
        import torchtitan.models.moe.utils as moe_utils

        histc = torch.histc
        torch.histc = lambda t, *a, **k: histc(t.float(), *a, **k).to(t.dtype)
        moe_kernels.fill_indices_cpu = _fill_indices_traceable
        moe_utils.generate_permute_indices = functools.partial(moe_utils.generate_permute_indices, use_cpu=True)
    return model, _tokens(args.vocab_size, seq, device)


def _tokens(vocab: int, seq: int, device: str):
    """The step's input, the same on every rank and run: fixed tokens (the loss is the logits' mean square)."""
    import torch

    return torch.randint(0, vocab, (1, seq), generator=torch.Generator().manual_seed(0)).to(device)


def blocking_host_copies(graph) -> None:
    """Every device-to-host copy in `graph` made blocking. torchtitan's EP dispatch copies its input splits to the
    host with non_blocking=True and relies on the blocking copy of the output splits that follows to wait for it;
    compiled, the first list may be read before its copy lands (pinned memory), and the two ranks' all_to_alls
    disagree and hang (run of 2026-11-30, benchmarks/results/gpu_2026-11-30_dsv3). A pre-pass: every
    configuration gets it, before any overlap pass."""
    import torch

    put, copy = torch.ops.prims.device_put.default, torch.ops.aten._to_copy.default
    for n in graph.nodes:
        if n.target is put and len(n.args) > 1 and torch.device(n.args[1]).type == "cpu":
            n.args, n.kwargs = (n.args[0], n.args[1]), {**n.kwargs, "non_blocking": False}
        elif n.target is copy and n.kwargs.get("non_blocking") and n.kwargs.get("device") is not None \
                and torch.device(n.kwargs["device"]).type == "cpu":
            n.kwargs = {**n.kwargs, "non_blocking": False}


def _fill_indices_traceable(counts, starts, write_offsets, experts_per_rank: int, num_ranks: int, max_len: int):
    """torchtitan's expert-permutation indices (its `fill_indices_cpu`) without a loop on `.item()`, so that the
    dry run traces one graph as the GPU's Triton kernel does: slot p holds token start[i] + (p - dest[i]) of the
    chunk i (rank r, local expert e) whose destination range holds p, and -1 where none does."""
    import torch

    per_rank = counts.view(num_ranks, experts_per_rank)
    dest = (write_offsets.view(1, -1) + per_rank.cumsum(0) - per_rank).reshape(-1)
    slot = torch.arange(max_len, device=counts.device).view(-1, 1)
    inside = (slot >= dest) & (slot < dest + counts)
    value = torch.where(inside, starts + slot - dest, 0).sum(1)
    return torch.where(inside.any(1), value, -1).to(torch.int32)


def gqa_flop_counts() -> None:
    """torch 2.11's FLOP counter rejects grouped-query attention (key and value with fewer heads than the query),
    so torch's overlap scheduler, which estimates each kernel by its FLOPs, fails on torchtitan's Llama3-8B
    (8 key-value heads of 32). torch 2.13 counts such a call as its key and value broadcast to the query's heads;
    where this torch raises, the same count is given here (a no-op on a torch that already counts it)."""
    import torch.utils.flop_counter as fc

    if getattr(fc.sdpa_flop_count, "_gqa", False):
        return
    fwd, bwd = fc.sdpa_flop_count, fc.sdpa_backward_flop_count

    def widen(q, *kv):  # key and value shapes with the query's head count
        return [(k[0], q[1], *k[2:]) if q[1] != k[1] and k[1] and q[1] % k[1] == 0 else k for k in kv]

    def sdpa_flop_count(query_shape, key_shape, value_shape):
        return fwd(query_shape, *widen(query_shape, key_shape, value_shape))

    def sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape):
        return bwd(grad_out_shape, query_shape, *widen(query_shape, key_shape, value_shape))

    sdpa_flop_count._gqa = True
    fc.sdpa_flop_count, fc.sdpa_backward_flop_count = sdpa_flop_count, sdpa_backward_flop_count
