"""DCGAN on 64x64 images: generator and discriminator, both trained with Adam.

One of the five models of the Habitat paper. The model provider returns both
networks in one module so one iteration trains the discriminator, then the
generator.
"""

import torch
import torch.nn as nn

LATENT = 100
FEATURES = 64


def generator():
    return nn.Sequential(
        nn.ConvTranspose2d(LATENT, FEATURES * 8, 4, 1, 0, bias=False),
        nn.BatchNorm2d(FEATURES * 8),
        nn.ReLU(True),
        nn.ConvTranspose2d(FEATURES * 8, FEATURES * 4, 4, 2, 1, bias=False),
        nn.BatchNorm2d(FEATURES * 4),
        nn.ReLU(True),
        nn.ConvTranspose2d(FEATURES * 4, FEATURES * 2, 4, 2, 1, bias=False),
        nn.BatchNorm2d(FEATURES * 2),
        nn.ReLU(True),
        nn.ConvTranspose2d(FEATURES * 2, FEATURES, 4, 2, 1, bias=False),
        nn.BatchNorm2d(FEATURES),
        nn.ReLU(True),
        nn.ConvTranspose2d(FEATURES, 3, 4, 2, 1, bias=False),
        nn.Tanh(),
    )


def discriminator():
    return nn.Sequential(
        nn.Conv2d(3, FEATURES, 4, 2, 1, bias=False),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(FEATURES, FEATURES * 2, 4, 2, 1, bias=False),
        nn.BatchNorm2d(FEATURES * 2),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(FEATURES * 2, FEATURES * 4, 4, 2, 1, bias=False),
        nn.BatchNorm2d(FEATURES * 4),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(FEATURES * 4, FEATURES * 8, 4, 2, 1, bias=False),
        nn.BatchNorm2d(FEATURES * 8),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(FEATURES * 8, 1, 4, 1, 0, bias=False),
        nn.Sigmoid(),
    )


class DCGAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = generator()
        self.discriminator = discriminator()


def wavecast_model():
    return DCGAN()


def wavecast_input(batch_size=128):
    real = torch.randn(batch_size, 3, 64, 64)
    noise = torch.randn(batch_size, LATENT, 1, 1)
    return real, noise


def wavecast_iteration(model):
    d_optimizer = torch.optim.Adam(model.discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    g_optimizer = torch.optim.Adam(model.generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    loss_fn = nn.BCELoss()

    def iteration(real, noise):
        ones = torch.ones(real.shape[0], device=real.device)
        zeros = torch.zeros(real.shape[0], device=real.device)
        d_optimizer.zero_grad()
        fake = model.generator(noise)
        d_loss = loss_fn(model.discriminator(real).view(-1), ones)
        d_loss = d_loss + loss_fn(model.discriminator(fake.detach()).view(-1), zeros)
        d_loss.backward()
        d_optimizer.step()

        g_optimizer.zero_grad()
        g_loss = loss_fn(model.discriminator(fake).view(-1), ones)
        g_loss.backward()
        g_optimizer.step()

    return iteration


if __name__ == "__main__":
    net = wavecast_model()
    step = wavecast_iteration(net)
    step(*wavecast_input(batch_size=2))
    print("one training iteration done")
