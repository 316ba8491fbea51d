"""burnish.nn: modules, configs, layers, losses and initializers (Burn's burn-nn)."""

from burnish.nn.activation import (
    Celu,
    Elu,
    Gelu,
    Glu,
    HardSigmoid,
    HardSwish,
    Hardtanh,
    LeakyRelu,
    LogSigmoid,
    Mish,
    PRelu,
    PReluConfig,
    Relu,
    Relu6,
    Selu,
    Sigmoid,
    Silu,
    Softplus,
    Softsign,
    SwiGlu,
    SwiGluConfig,
    Tanh,
)
from burnish.nn.attention import (
    MhaOutput,
    MultiHeadAttention,
    MultiHeadAttentionConfig,
    causal_mask,
)
from burnish.nn.config import Config
from burnish.nn.conv import (
    Conv,
    Conv1d,
    Conv1dConfig,
    Conv2d,
    Conv2dConfig,
    Conv3d,
    Conv3dConfig,
    ConvTranspose,
    ConvTranspose1d,
    ConvTranspose1dConfig,
    ConvTranspose2d,
    ConvTranspose2dConfig,
    ConvTranspose3d,
    ConvTranspose3dConfig,
)
from burnish.nn.ctc import CtcLoss
from burnish.nn.dropout import Dropout
from burnish.nn.embedding import Embedding, EmbeddingConfig
from burnish.nn.initializer import (
    Constant,
    Initializer,
    KaimingNormal,
    KaimingUniform,
    Normal,
    Ones,
    Orthogonal,
    Uniform,
    XavierNormal,
    XavierUniform,
    Zeros,
)
from burnish.nn.linear import Bilinear, BilinearConfig, Linear, LinearConfig
from burnish.nn.loss import (
    BinaryCrossEntropyLoss,
    CrossEntropyLoss,
    HuberLoss,
    KlDivLoss,
    MseLoss,
    PoissonNllLoss,
    SmoothL1Loss,
)
from burnish.nn.module import Module
from burnish.nn.norm import (
    BatchNorm,
    BatchNormConfig,
    GroupNorm,
    GroupNormConfig,
    InstanceNorm,
    InstanceNormConfig,
    LayerNorm,
    LayerNormConfig,
    RmsNorm,
    RmsNormConfig,
)
from burnish.nn.param import Param
from burnish.nn.pool import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AvgPool1d,
    AvgPool2d,
    MaxPool1d,
    MaxPool2d,
)
from burnish.nn.positional import (
    PositionalEncoding,
    PositionalEncodingConfig,
    RotaryEncoding,
    RotaryEncodingConfig,
)
from burnish.nn.ranking_loss import CosineEmbeddingLoss, MarginRankingLoss, TripletMarginLoss
from burnish.nn.resize import Interpolate, PixelShuffle, PixelUnshuffle
from burnish.nn.rnn import (
    BiLstm,
    BiLstmConfig,
    GateController,
    Gru,
    GruConfig,
    Lstm,
    LstmConfig,
    LstmState,
)
from burnish.nn.transformer import (
    PositionWiseFeedForward,
    PositionWiseFeedForwardConfig,
    TransformerDecoder,
    TransformerDecoderConfig,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderConfig,
    TransformerEncoderLayer,
)
from burnish.nn.unfold import Unfold

__all__ = [
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AvgPool1d", "AvgPool2d",
    "BatchNorm", "BatchNormConfig", "Bilinear", "BilinearConfig", "BinaryCrossEntropyLoss",
    "Celu", "Config", "Constant", "Conv", "Conv1d", "Conv1dConfig", "Conv2d", "Conv2dConfig",
    "Conv3d", "Conv3dConfig", "ConvTranspose", "ConvTranspose1d", "ConvTranspose1dConfig",
    "ConvTranspose2d", "ConvTranspose2dConfig", "ConvTranspose3d", "ConvTranspose3dConfig",
    "CrossEntropyLoss", "Dropout", "Elu", "Embedding", "EmbeddingConfig", "Gelu", "Glu",
    "GroupNorm", "GroupNormConfig", "HardSigmoid", "HardSwish", "Hardtanh", "HuberLoss",
    "Initializer", "KaimingNormal", "KaimingUniform", "LayerNorm", "LayerNormConfig",
    "LeakyRelu", "Linear", "LinearConfig", "LogSigmoid", "MaxPool1d", "MaxPool2d", "Mish",
    "Module", "MseLoss", "Normal", "Ones", "Orthogonal", "PRelu", "PReluConfig", "Param", "Relu",
    "Relu6", "RmsNorm", "RmsNormConfig", "Selu", "Sigmoid", "Silu", "Softplus", "Softsign",
    "SwiGlu", "SwiGluConfig", "Tanh", "Uniform", "XavierNormal", "XavierUniform", "Zeros",
    "causal_mask", "MhaOutput", "MultiHeadAttention", "MultiHeadAttentionConfig",
    "PositionalEncoding", "PositionalEncodingConfig", "RotaryEncoding", "RotaryEncodingConfig",
    "PositionWiseFeedForward", "PositionWiseFeedForwardConfig", "TransformerDecoder",
    "TransformerDecoderConfig", "TransformerDecoderLayer", "TransformerEncoder",
    "TransformerEncoderConfig", "TransformerEncoderLayer",
    "BiLstm", "BiLstmConfig", "GateController", "Gru", "GruConfig", "Lstm", "LstmConfig",
    "LstmState",
    "InstanceNorm", "InstanceNormConfig", "Interpolate", "PixelShuffle", "PixelUnshuffle",
    "Unfold",
    "CosineEmbeddingLoss", "KlDivLoss", "MarginRankingLoss", "PoissonNllLoss", "SmoothL1Loss",
    "TripletMarginLoss", "CtcLoss",
]
