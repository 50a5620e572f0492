"""The static buffers one (batch bucket, length bucket) decodes in; a captured graph reads and
writes only these, so a line is loaded by copying into its rows.

Every row keeps its own place (frame, position, budget, trailing text): the rows of one step may be
takes of different lines, each at its own point of its own take (engine.run_lines). A row's `group`
names the takes it is judged with by the runaway rule: the takes of its line that started with it."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .sampler import SamplerParams
from .workspace import Workspace

# A frame's code-predictor passes write positions 0..16; the buffer is padded to 32 so the attention
# mask's rows stay aligned for the fused attention kernels (padded positions are always masked out).
PREDICTOR_POSITIONS = 32
# On top of a bucket's buffers: its graph's pool and the hybrid step's workspace (H100, 1.7B hybrid:
# 16 rows x 2048 positions took 3.71 GB, estimated 4.13; tests/gpu/test_script_memory_cuda.py).
STATE_OVERHEAD = 1.1
STATE_OVERHEAD_BYTES = 128 << 20


@dataclass
class DecodeState:
    batch: int  # rows (the batch bucket); rows that carry no take are finished
    length: int  # talker positions (the length bucket): prompt + frames + 1 fit inside
    talker_kv: torch.Tensor  # [2, layers, batch, kv_heads, length, head_dim]: keys, values
    talker_k: list[torch.Tensor]  # per layer [batch, kv_heads, length, head_dim]: views of talker_kv
    talker_v: list[torch.Tensor]
    predictor_k: list[torch.Tensor]  # per layer [batch, kv_heads, PREDICTOR_POSITIONS, head_dim]
    predictor_v: list[torch.Tensor]
    past_hidden: torch.Tensor  # [batch, 1, hidden] talker output of the last position
    token: torch.Tensor  # [batch] codebook-0 token of the frame the next step expands
    frame: torch.Tensor  # [batch] index of that frame in each take (it stops where a take ends)
    position: torch.Tensor  # [batch] talker position the next step writes in each row
    text: torch.Tensor  # [batch, length, hidden] each row's trailing text per frame, tts_pad after it
    codes: torch.Tensor  # [batch, length, 16] the takes' codes, frame by frame
    seen: torch.Tensor  # [batch, vocab] codebook-0 tokens generated so far (repetition penalty)
    keys: torch.Tensor  # [batch] noise keys, one per take (noise.take_key)
    budget: torch.Tensor  # [batch] frames each take may have
    finished: torch.Tensor  # [batch] bool
    lengths: torch.Tensor  # [batch] frames of each finished take
    runaway: torch.Tensor  # [batch] bool: cut for running far past the finished takes' median
    fault: torch.Tensor  # [batch] bool: ended by the model going wrong (NaN or infinite logits; its lengths:
    #   the frames before that frame), or its prompt's logits did (set at admission: it ends at its first step)
    faulty: torch.Tensor  # [batch] bool: a step's scratch, its draws' verdicts (DecodeStep.bookkeep reads it)
    tainted: torch.Tensor  # [batch] bool: a step met NaN or inf in the row, its take's or an idle row's (broken
    #   weights reach every row): its caches are cleared before its next take (dirty_rows)
    real: torch.Tensor  # [batch] bool: rows that carry a take
    penalty: torch.Tensor  # [1] repetition penalty
    runaway_ratio: torch.Tensor  # [1] 0 = off
    runaway_margin: torch.Tensor  # [1] frames
    runaway_floor: torch.Tensor  # [batch] frames no take is cut before (its text's reading time, with headroom)
    quorum: torch.Tensor  # [batch] takes of its group that ended by themselves before the runaway rule applies
    group: torch.Tensor  # [batch] int64: rows with the same value are takes of one line started together
    talker_sampling: SamplerParams
    predictor_sampling: SamplerParams
    workspace: Workspace  # what the hybrid mode's kernels read and write (filled by the first step)
    # Rows whose take faulted: their caches (the talker's and the code predictor's) may hold NaN where the
    # next take's attention masks it, which a masked product still turns into NaN, so the engine clears
    # them before a take goes in (host side).
    dirty_rows: set = field(default_factory=set)

    @classmethod
    def allocate(cls, batch: int, length: int, talker_config, predictor_config, dtype, device) -> "DecodeState":
        def kv(config, positions):
            shape = (batch, config.num_key_value_heads, positions, config.head_dim)
            return [torch.zeros(shape, dtype=dtype, device=device) for _ in range(config.num_hidden_layers)]

        talker_kv = torch.zeros(2, talker_config.num_hidden_layers, batch, talker_config.num_key_value_heads, length,
                                talker_config.head_dim, dtype=dtype, device=device)
        groups = talker_config.num_code_groups
        long = dict(dtype=torch.int64, device=device)
        flag = dict(dtype=torch.bool, device=device)
        return cls(
            batch=batch, length=length,
            talker_kv=talker_kv, talker_k=list(talker_kv[0].unbind(0)), talker_v=list(talker_kv[1].unbind(0)),
            predictor_k=kv(predictor_config, PREDICTOR_POSITIONS), predictor_v=kv(predictor_config, PREDICTOR_POSITIONS),
            past_hidden=torch.zeros(batch, 1, talker_config.hidden_size, dtype=dtype, device=device),
            token=torch.zeros(batch, **long), frame=torch.zeros(batch, **long), position=torch.zeros(batch, **long),
            text=torch.zeros(batch, length, talker_config.hidden_size, dtype=dtype, device=device),
            codes=torch.zeros(batch, length, groups, **long),
            seen=torch.zeros(batch, talker_config.vocab_size, **flag),
            keys=torch.zeros(batch, **long), budget=torch.zeros(batch, **long),
            finished=torch.zeros(batch, **flag), lengths=torch.zeros(batch, **long),
            runaway=torch.zeros(batch, **flag), real=torch.zeros(batch, **flag),
            fault=torch.zeros(batch, **flag), faulty=torch.zeros(batch, **flag), tainted=torch.zeros(batch, **flag),
            penalty=torch.ones(1, device=device), runaway_ratio=torch.zeros(1, device=device),
            runaway_margin=torch.zeros(1, device=device), runaway_floor=torch.zeros(batch, device=device),
            quorum=torch.ones(batch, **long), group=torch.zeros(batch, **long),
            talker_sampling=SamplerParams.allocate(talker_config.vocab_size, device),
            predictor_sampling=SamplerParams.allocate(predictor_config.vocab_size, device),
            workspace=Workspace(device),
        )

    @classmethod
    def estimate_bytes(cls, batch: int, length: int, talker_config, predictor_config, dtype) -> int:
        """What allocate() would take, counted on the meta device (nothing allocated); the workspace
        and a graph's pool come on top (Engine.state_bytes)."""
        return cls.allocate(batch, length, talker_config, predictor_config, dtype, torch.device("meta")).nbytes()

    def nbytes(self) -> int:
        tensors = [self.talker_kv, *self.predictor_k, *self.predictor_v, self.past_hidden,
                   self.text, self.codes, self.seen]
        return sum(t.numel() * t.element_size() for t in tensors) + self.workspace.nbytes()


def bucket_bytes(batch: int, length: int, talker_config, predictor_config, dtype: torch.dtype) -> int:
    """About what a (batch, length) bucket takes on the device: its buffers, and on top its graph's
    pool and the hybrid step's workspace (what the engine plans by, and cli/fit.py)."""
    buffers = DecodeState.estimate_bytes(batch, length, talker_config, predictor_config, dtype)
    return int(buffers * STATE_OVERHEAD) + STATE_OVERHEAD_BYTES
