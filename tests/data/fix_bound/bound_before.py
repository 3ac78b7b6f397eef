import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        t = x * 2
        scale = torch.ones(4, device=x.device)
        return self.proj(t * scale)


m = Block().half()
print(m(torch.zeros(2, 4, dtype=torch.half)).dtype)
