"""An inpainting training step: the mask is built in float32 and meets fp16 latents."""

import torch
import torch.nn.functional as F
from torch import nn


class TinyUNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv_in = nn.Conv2d(5, 8, 3, padding=1)
        self.conv_out = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, sample):
        return self.conv_out(F.silu(self.conv_in(sample)))


def training_step(unet, latents, noise):
    mask = torch.ones(latents.shape[0], 1, *latents.shape[2:], device=latents.device)
    model_input = torch.cat([latents + noise, mask], dim=1)
    pred = unet(model_input)
    return F.mse_loss(pred.float(), noise.float())


def main() -> None:
    unet = TinyUNet().to(dtype=torch.float16)
    latents = torch.randn(2, 4, 8, 8, dtype=torch.float16)
    training_step(unet, latents, torch.randn_like(latents))


if __name__ == "__main__":
    main()
