import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.head = nn.Sequential(nn.Linear(4, 4), nn.GELU())

    def forward(self, x):
        h = self.norm(x).float()
        return self.head(h)


m = Block().half()
print(m(torch.zeros(2, 4, dtype=torch.half)).dtype)
