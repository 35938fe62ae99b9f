"""wav2vec 2.0 (Hugging Face transformers) fine-tuned for speech recognition with CTC.

Built from a config object (no weights downloaded): wav2vec2-base (a 7-layer
convolutional feature encoder over raw 16 kHz audio, 12 transformer layers of width
768, LayerDrop 0.1 as its config has it) on 4-second clips, with a 32-character CTC
head. WAVECAST_WAV2VEC2_LAYERS changes the depth.
"""

import os

import torch
from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

SAMPLES = 4 * 16000
LABEL_LENGTH = 48
VOCABULARY = 32
DEVICE = "cuda"


def config():
    return Wav2Vec2Config(
        vocab_size=VOCABULARY,
        num_hidden_layers=int(os.environ.get("WAVECAST_WAV2VEC2_LAYERS", "12")),
        layerdrop=0.1,
        ctc_loss_reduction="mean",
        pad_token_id=0,
        attn_implementation="sdpa",
    )


def wavecast_model():
    return Wav2Vec2ForCTC(config()).to(DEVICE)


def wavecast_input(batch_size=8):
    audio = torch.randn(batch_size, SAMPLES, device=DEVICE)
    labels = torch.randint(1, VOCABULARY, (batch_size, LABEL_LENGTH), device=DEVICE)
    return audio, labels


def wavecast_iteration(model):
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def iteration(audio, labels):
        optimizer.zero_grad()
        outputs = model(input_values=audio, labels=labels)
        outputs.loss.backward()
        optimizer.step()

    return iteration
