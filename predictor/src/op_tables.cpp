#include "op_tables.h"

#include "cost_shapes.h"

#include <unordered_map>

namespace wavecast::op_tables {

const std::unordered_set<std::string>& metadataOps() {
  static const std::unordered_set<std::string> ops = {"view",
                                                      "_unsafe_view",
                                                      "reshape",
                                                      "_reshape_alias",
                                                      "expand",
                                                      "expand_as",
                                                      "t",
                                                      "transpose",
                                                      "permute",
                                                      "as_strided",
                                                      "detach",
                                                      "unsqueeze",
                                                      "squeeze",
                                                      "slice",
                                                      "select",
                                                      "alias",
                                                      "view_as",
                                                      "unbind",
                                                      "split",
                                                      "unsafe_split",
                                                      "split_with_sizes",
                                                      "unsafe_split_with_sizes",
                                                      "chunk",
                                                      "narrow",
                                                      "flatten",
                                                      "unflatten",
                                                      "movedim",
                                                      "diagonal",
                                                      "unfold",
                                                      "numpy_T",
                                                      "mT",
                                                      "mH",
                                                      "adjoint",
                                                      "lift_fresh",
                                                      "lift",
                                                      "empty",
                                                      "empty_like",
                                                      "empty_strided",
                                                      "new_empty",
                                                      "new_empty_strided",
                                                      "resize_",
                                                      "set_",
                                                      "size",
                                                      "stride",
                                                      "is_same_size",
                                                      "dim",
                                                      "contiguous_view",
                                                      "_nested_view_from_buffer",
                                                      "real",
                                                      "view_as_real",
                                                      "view_as_complex",
                                                      "conj",
                                                      "_conj",
                                                      "_neg_view",
                                                      "resolve_conj",
                                                      "resolve_neg",
                                                      "detach_",
                                                      "requires_grad_",
                                                      "retain_grad",
                                                      "output_nr",
                                                      "_version",
                                                      "is_contiguous",
                                                      "device",
                                                      "_has_compatible_shallow_copy_type",
                                                      "sym_size",
                                                      "sym_stride",
                                                      // A functional collective's wait: the
                                                      // compute stream waits for NCCL's (an
                                                      // event, no kernel; the collective's
                                                      // wait_op is where it is modelled).
                                                      "wait_tensor",
                                                      "sym_numel",
                                                      "record_stream",
                                                      "_make_dual",
                                                      "_unpack_dual",
                                                      "prim_device"};
  return ops;
}

// FLOPs per output element of elementwise ops (transcendentals cost more); default 1.
double elementwiseFlops(const std::string& stem) {
  static const std::unordered_map<std::string, double> table = {
      {"gelu", 14},
      {"gelu_backward", 18},
      {"tanh", 6},
      {"tanh_backward", 3},
      {"sigmoid", 4},
      {"sigmoid_backward", 3},
      {"silu", 5},
      {"silu_backward", 8},
      {"mish", 12},
      {"mish_backward", 16},
      {"exp", 4},
      {"log", 4},
      {"log1p", 4},
      {"expm1", 4},
      {"sqrt", 2},
      {"rsqrt", 2},
      {"pow", 4},
      {"softplus", 8},
      {"softplus_backward", 8},
      {"elu", 4},
      {"elu_backward", 4},
      {"erf", 8},
      {"addcmul", 2},
      {"addcdiv", 2},
      {"_amp_foreach_non_finite_check_and_unscale", 2},
      {"lerp", 2},
      {"hardswish", 4},
      {"hardswish_backward", 4},
      {"leaky_relu_backward", 2},
      {"hardtanh_backward", 2},
      {"clamp", 2},
      {"sin", 6},
      {"cos", 6},
      {"native_dropout", 2},
      {"bernoulli", 2},
      {"native_dropout_backward", 1},
  };
  const auto it = table.find(stem);
  return it == table.end() ? 1.0 : it->second;
}

const std::unordered_set<std::string>& elementwiseOps() {
  static const std::unordered_set<std::string> ops = {"add",
                                                      "sub",
                                                      "rsub",
                                                      "mul",
                                                      "div",
                                                      "true_divide",
                                                      "floor_divide",
                                                      "remainder",
                                                      "fmod",
                                                      "neg",
                                                      "abs",
                                                      "sign",
                                                      "sgn",
                                                      "reciprocal",
                                                      "exp",
                                                      "exp2",
                                                      "expm1",
                                                      "log",
                                                      "log2",
                                                      "log10",
                                                      "log1p",
                                                      "sqrt",
                                                      "rsqrt",
                                                      "pow",
                                                      "square",
                                                      "sin",
                                                      "cos",
                                                      "tan",
                                                      "erf",
                                                      "erfc",
                                                      "erfinv",
                                                      "floor",
                                                      "ceil",
                                                      "round",
                                                      "trunc",
                                                      "frac",
                                                      "relu",
                                                      "relu6",
                                                      "threshold",
                                                      "threshold_backward",
                                                      "gelu",
                                                      "gelu_backward",
                                                      "silu",
                                                      "silu_backward",
                                                      "mish",
                                                      "mish_backward",
                                                      "sigmoid",
                                                      "sigmoid_backward",
                                                      "tanh",
                                                      "tanh_backward",
                                                      "elu",
                                                      "elu_backward",
                                                      "selu",
                                                      "celu",
                                                      "leaky_relu",
                                                      "leaky_relu_backward",
                                                      "hardtanh",
                                                      "hardtanh_backward",
                                                      "hardswish",
                                                      "hardswish_backward",
                                                      "hardsigmoid",
                                                      "hardsigmoid_backward",
                                                      "softplus",
                                                      "softplus_backward",
                                                      "prelu",
                                                      "glu",
                                                      "glu_backward",
                                                      "logit",
                                                      "clamp",
                                                      "clamp_min",
                                                      "clamp_max",
                                                      "_amp_update_scale",
                                                      "clip",
                                                      "where",
                                                      "masked_fill",
                                                      "eq",
                                                      "ne",
                                                      "lt",
                                                      "le",
                                                      "gt",
                                                      "ge",
                                                      "logical_and",
                                                      "logical_or",
                                                      "logical_not",
                                                      "logical_xor",
                                                      "bitwise_and",
                                                      "bitwise_or",
                                                      "bitwise_xor",
                                                      "bitwise_not",
                                                      "__and__",
                                                      "__or__",
                                                      "maximum",
                                                      "minimum",
                                                      "fmax",
                                                      "fmin",
                                                      "isnan",
                                                      "isinf",
                                                      "isfinite",
                                                      "nan_to_num",
                                                      "addcmul",
                                                      "addcdiv",
                                                      "lerp",
                                                      "fill",
                                                      "zero",
                                                      "zeros",
                                                      "ones",
                                                      "full",
                                                      "zeros_like",
                                                      "ones_like",
                                                      "full_like",
                                                      "new_zeros",
                                                      "new_ones",
                                                      "new_full",
                                                      "scalar_tensor",
                                                      "arange",
                                                      "linspace",
                                                      "rand",
                                                      "randn",
                                                      "rand_like",
                                                      "randn_like",
                                                      "randint",
                                                      "normal",
                                                      "uniform",
                                                      "bernoulli",
                                                      "native_dropout",
                                                      "native_dropout_backward",
                                                      "dropout",
                                                      "feature_dropout",
                                                      "alpha_dropout",
                                                      "masked_scale",
                                                      "xlogy",
                                                      "hypot",
                                                      "atan2",
                                                      "heaviside",
                                                      "copysign",
                                                      "sinc",
                                                      "digamma",
                                                      "lgamma",
                                                      "polar",
                                                      "float_power",
                                                      "logaddexp",
                                                      "_masked_scale",
                                                      "signbit"};
  return ops;
}

const std::unordered_set<std::string>& copyOps() {
  static const std::unordered_set<std::string> ops = {"copy",
                                                      "clone",
                                                      "_to_copy",
                                                      "to",
                                                      "contiguous",
                                                      "cat",
                                                      "_cat",
                                                      "stack",
                                                      "hstack",
                                                      "vstack",
                                                      "index_select",
                                                      "gather",
                                                      "scatter",
                                                      "scatter_add",
                                                      "scatter_reduce",
                                                      "index",
                                                      "index_put",
                                                      "_index_put_impl",
                                                      "index_add",
                                                      "index_copy",
                                                      "index_fill",
                                                      "masked_select",
                                                      "masked_scatter",
                                                      "repeat",
                                                      "repeat_interleave",
                                                      "tile",
                                                      "flip",
                                                      "roll",
                                                      "rot90",
                                                      "constant_pad_nd",
                                                      "pad",
                                                      "reflection_pad1d",
                                                      "reflection_pad2d",
                                                      "replication_pad1d",
                                                      "replication_pad2d",
                                                      "narrow_copy",
                                                      "slice_backward",
                                                      "select_backward",
                                                      "index_select_backward",
                                                      "unfold_backward",
                                                      "diagonal_backward",
                                                      "as_strided_scatter",
                                                      "slice_scatter",
                                                      "select_scatter",
                                                      "diagonal_scatter",
                                                      "_local_scalar_dense",
                                                      "item",
                                                      "tril",
                                                      "triu",
                                                      "take",
                                                      "put",
                                                      "nonzero",
                                                      "im2col",
                                                      "col2im",
                                                      "pixel_shuffle",
                                                      "pixel_unshuffle",
                                                      "channel_shuffle",
                                                      "one_hot",
                                                      "_unsafe_index",
                                                      "_copy_from",
                                                      "_copy_from_and_resize",
                                                      "alias_copy",
                                                      "view_copy",
                                                      "expand_copy",
                                                      "permute_copy",
                                                      "t_copy",
                                                      "transpose_copy",
                                                      "_reshape_copy",
                                                      "split_with_sizes_copy",
                                                      // FSDP2's: parameters into the gather
                                                      // buffer, gradients into the scatter's
                                                      "all_gather_copy_in",
                                                      "chunk_cat",
                                                      "_chunk_cat"};
  return ops;
}

const std::unordered_set<std::string>& reductionOps() {
  static const std::unordered_set<std::string> ops = {"sum",
                                                      "mean",
                                                      "nansum",
                                                      "nanmean",
                                                      "prod",
                                                      "max",
                                                      "min",
                                                      "amax",
                                                      "amin",
                                                      "aminmax",
                                                      "argmax",
                                                      "argmin",
                                                      "norm",
                                                      "linalg_vector_norm",
                                                      "linalg_norm",
                                                      "frobenius_norm",
                                                      "var",
                                                      "std",
                                                      "var_mean",
                                                      "std_mean",
                                                      "all",
                                                      "any",
                                                      "logsumexp",
                                                      "cumsum",
                                                      "cumprod",
                                                      "cummax",
                                                      "cummin",
                                                      "count_nonzero",
                                                      "median",
                                                      "mode",
                                                      "topk",
                                                      "sort",
                                                      "argsort",
                                                      "kthvalue",
                                                      "_foreach_norm",
                                                      "_is_all_true",
                                                      "multinomial",
                                                      "bincount",
                                                      "histc",
                                                      "unique",
                                                      "_unique2",
                                                      "dist",
                                                      "cosine_similarity",
                                                      "sum_to_size",
                                                      "_euclidean_dist",
                                                      "cdist",
                                                      "trace"};
  return ops;
}

using cost_shapes::contains;

bool isConvolutionBackward(const std::string& stem) {
  return stem == "convolution_backward" || stem == "cudnn_convolution_backward" ||
         stem == "convolution_backward_overrideable" || stem == "mkldnn_convolution_backward" ||
         stem == "cudnn_convolution_transpose_backward";
}

bool isConvolution(const std::string& stem) {
  return stem == "convolution" || stem == "_convolution" || stem == "conv1d" || stem == "conv2d" ||
         stem == "conv3d" || stem == "cudnn_convolution" || stem == "cudnn_convolution_transpose" ||
         stem == "conv_transpose1d" || stem == "conv_transpose2d" || stem == "conv_transpose3d" ||
         stem == "mkldnn_convolution" || stem == "_slow_conv2d_forward" ||
         stem == "slow_conv_transpose2d" || stem == "thnn_conv2d" || stem == "_convolution_mode" ||
         stem == "conv_depthwise2d" || stem == "_conv_depthwise2d" ||
         stem == "cudnn_convolution_relu" || stem == "cudnn_convolution_add_relu";
}

std::string stemOf(const std::string& name) {
  const auto ns = name.find("::"); // aten::, and torchvision::, prims::, transformers::
  return ns == std::string::npos ? name : name.substr(ns + 2);
}

bool isFft(const std::string& stem) {
  return stem == "_fft_r2c" || stem == "_fft_c2r" || stem == "_fft_c2c";
}

bool isGroupedGemm(const std::string& stem) {
  return stem == "_grouped_mm" || stem == "grouped_mm_fallback";
}

bool isGroupedGemmBackward(const std::string& stem) {
  return stem == "grouped_mm_fallback_backward";
}

bool isGemm(const std::string& stem) {
  static const std::unordered_set<std::string> ops = {"linear",       "addmm",
                                                      "mm",           "bmm",
                                                      "matmul",       "baddbmm",
                                                      "addbmm",       "addmv",
                                                      "mv",           "dot",
                                                      "vdot",         "inner",
                                                      "outer",        "ger",
                                                      "addr",         "_addmm_activation",
                                                      "einsum",       "tensordot",
                                                      "_scaled_mm",   "_int_mm",
                                                      "chain_matmul", "linalg_multi_dot"};
  return ops.count(stem) > 0;
}

bool isAttention(const std::string& stem) {
  return contains(stem, "scaled_dot_product") || contains(stem, "flash_attention") ||
         contains(stem, "efficient_attention") || stem == "_native_multi_head_attention";
}

bool isNormalization(const std::string& stem) {
  return contains(stem, "batch_norm") || contains(stem, "layer_norm") ||
         contains(stem, "group_norm") || contains(stem, "instance_norm") ||
         contains(stem, "rms_norm") || stem == "_batch_norm_impl_index" ||
         stem == "_batch_norm_impl_index_backward" ||
         // torch.nn.utils.weight_norm: a block per slice sums its squares, then scales it
         // (aten/src/ATen/native/cuda/WeightNorm.cu), as a training norm reads twice.
         stem == "_weight_norm_interface" || stem == "_weight_norm_interface_backward";
}

bool isPooling(const std::string& stem) {
  return contains(stem, "pool");
}

bool isLoss(const std::string& stem) {
  return contains(stem, "nll_loss") || contains(stem, "mse_loss") || contains(stem, "l1_loss") ||
         contains(stem, "huber_loss") || contains(stem, "binary_cross_entropy") ||
         contains(stem, "kl_div") || contains(stem, "cross_entropy") ||
         contains(stem, "soft_margin") || contains(stem, "hinge") || contains(stem, "ctc_loss") ||
         contains(stem, "poisson_nll");
}

bool isRecurrent(const std::string& stem) {
  return stem == "lstm" || stem == "gru" || stem == "rnn_tanh" || stem == "rnn_relu" ||
         contains(stem, "cudnn_rnn") || contains(stem, "lstm_cell") || contains(stem, "gru_cell") ||
         contains(stem, "rnn_tanh_cell") || contains(stem, "rnn_relu_cell") ||
         contains(stem, "miopen_rnn") || stem == "_lstm_mps";
}

bool isEmbedding(const std::string& stem) {
  return stem == "embedding" || stem == "embedding_dense_backward" ||
         stem == "embedding_backward" || stem == "_embedding_bag" ||
         stem == "_embedding_bag_backward" || stem == "embedding_renorm";
}

} // namespace wavecast::op_tables
