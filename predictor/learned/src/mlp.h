// The network every family uses (private: torch never reaches public headers).
#pragma once

#include <torch/torch.h>

namespace wavecast::learned {

inline torch::nn::Sequential makeMlp(int inputs, int hidden) {
  return torch::nn::Sequential(torch::nn::Linear(inputs, hidden), torch::nn::ReLU(),
                               torch::nn::Linear(hidden, hidden), torch::nn::ReLU(),
                               torch::nn::Linear(hidden, hidden / 2), torch::nn::ReLU(),
                               torch::nn::Linear(hidden / 2, 1));
}

} // namespace wavecast::learned
