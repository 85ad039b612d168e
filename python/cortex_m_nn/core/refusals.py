"""Why a rule refuses a pattern: a kind the advice table is keyed by, and a message for people.

Every ``LoweringRefused`` names a :class:`Refusal`; its message (shown in the report and the
one-line compile error) stays free text. ``cortex_m_nn.core.rewrites`` finds advice by the kind,
never by reading the message.
"""

from __future__ import annotations

from enum import Enum


class Refusal(Enum):
    """The kinds of refusal, grouped by what they are about."""

    # -- the value a rule reads -----------------------------------------------------------
    INPUT_NOT_QUANTIZED = "input_not_quantized"
    INPUT_QPARAMS_DISAGREE = "input_qparams_disagree"
    NOT_A_CONSTANT = "not_a_constant"
    NOT_INT8 = "not_int8"
    #: the quantizer left the op in float: no pattern, no rule (see ``records.NOT_QUANTIZED``)
    NOT_QUANTIZED = "not_quantized"
    # -- weights ------------------------------------------------------------------------
    WEIGHT_NOT_CONSTANT = "weight_not_constant"
    WEIGHT_CHANNEL_AXIS = "weight_channel_axis"
    WEIGHT_NOT_SYMMETRIC = "weight_not_symmetric"
    # -- what follows or surrounds the op -------------------------------------------------
    ACTIVATION_AFTER = "activation_after"
    #: an op that only moves bytes would have to requantize (output qparams differ)
    QPARAMS_CHANGE = "qparams_change"
    TENSOR_ARGUMENTS = "tensor_arguments"
    # -- element-wise binary ops ----------------------------------------------------------
    OPERAND_NOT_FINITE = "operand_not_finite"
    OPERAND_TYPE = "operand_type"
    BROADCAST_LAYOUT = "broadcast_layout"
    BROADCAST_RANK = "broadcast_rank"
    CONSTANT_OPERANDS = "constant_operands"
    ALPHA = "alpha"
    QUANTIZED_DIFFERENTLY = "quantized_differently"
    MUL_REQUANTIZATION = "mul_requantization"
    ELEMENTWISE_SHAPE = "elementwise_shape"
    #: a table's function is undefined (NaN) on part of its input's int8 range
    UNDEFINED_VALUES = "undefined_values"
    #: a reduction the int8 kernel does not compute (a dtype argument, more than 4 stored dims)
    REDUCTION = "reduction"
    # -- convolutions ---------------------------------------------------------------------
    STRING_PADDING = "string_padding"
    CONV_INPUT_RANK = "conv_input_rank"
    CONV_OUTPUT_SHAPE = "conv_output_shape"
    GROUPED_TRANSPOSED_CONV = "grouped_transposed_conv"
    DILATED_TRANSPOSED_CONV = "dilated_transposed_conv"
    TRANSPOSED_CONV_NOT_EXACT = "transposed_conv_not_exact"
    # -- pools ----------------------------------------------------------------------------
    POOL_ARGUMENT = "pool_argument"
    POOL_INPUT_RANK = "pool_input_rank"
    POOL_OUTPUT_SHAPE = "pool_output_shape"
    POOL_DILATION = "pool_dilation"
    COUNT_INCLUDE_PAD = "count_include_pad"
    DIVISOR_OVERRIDE = "divisor_override"
    ADAPTIVE_NOT_UNIFORM = "adaptive_not_uniform"
    # -- layout and data movement ---------------------------------------------------------
    IMAGE_RANK = "image_rank"
    NOT_A_VIEW = "not_a_view"
    NOT_A_PERMUTATION = "not_a_permutation"
    TRANSPOSE_DIMS = "transpose_dims"
    PAD_MODE = "pad_mode"
    PAD_VALUE = "pad_value"
    NEGATIVE_PADDING = "negative_padding"
    PAD_RANK = "pad_rank"
    PAD_DIMS = "pad_dims"
    CONCAT_REQUANTIZING = "concat_requantizing"
    CONCAT_RANKS = "concat_ranks"
    DROPOUT_TRAINING = "dropout_training"
    RESIZE_SIZE = "resize_size"
    #: data movement that is neither a view, one transpose nor one strided copy
    NOT_STRIDED = "not_strided"
    # -- linear, products, softmax --------------------------------------------------------
    LINEAR_OVER_WIDTH = "linear_over_width"
    LINEAR_SCRATCH = "linear_scratch"
    #: int16 requantization beyond what the s16 kernels' Q15 output stage takes (shift > 14)
    INT16_REQUANTIZATION = "int16_requantization"
    #: an int16 interpolated table erring by more than an int8 table would (ops/lut.py)
    INT16_TABLE_ERROR = "int16_table_error"
    OPERAND_RANK = "operand_rank"
    MATMUL_INNER_DIMENSION = "matmul_inner_dimension"
    MATMUL_BATCH_BROADCAST = "matmul_batch_broadcast"
    MATMUL_RESULT_SHAPE = "matmul_result_shape"
    SOFTMAX_DIM = "softmax_dim"
    SOFTMAX_OUTPUT_QPARAMS = "softmax_output_qparams"
    SOFTMAX_ROW_LENGTH = "softmax_row_length"
    # -- layer norm and group norm --------------------------------------------------------
    NORM_SHAPE = "norm_shape"
    NORM_INPUT_RANK = "norm_input_rank"
    NORM_GROUP_SIZE = "norm_group_size"
    NORM_SCALE = "norm_scale"
    # -- recurrent layers -------------------------------------------------------------------
    #: an integer argument of arm_lstm_unidirectional_* out of its range
    LSTM_RANGE = "lstm_range"
    #: an initial state not quantized as the kernel reads it
    LSTM_STATE = "lstm_state"
    #: an integer argument of our GRU out of its range, or a case it has not (int16)
    GRU_RANGE = "gru_range"
    # -- SVDF ---------------------------------------------------------------------------
    SVDF_SHAPE = "svdf_shape"
    SVDF_REQUANTIZATION = "svdf_requantization"
    SVDF_ACCUMULATOR = "svdf_accumulator"
    # -- mutation (the functional form made before quantization: lower/functional) ---------
    MUTATED_INPUT = "mutated_input"
    MUTATED_BUFFER = "mutated_buffer"
    MUTATED_VIEW = "mutated_view"
    IN_PLACE_ONLY = "in_place_only"


class LoweringRefused(Exception):
    """A rule cannot lower this node: ``kind`` says why for tools, the message for people."""

    def __init__(self, kind: Refusal, message: str) -> None:
        super().__init__(message)
        self.kind = kind
