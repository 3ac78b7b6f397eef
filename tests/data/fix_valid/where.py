import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        mask = torch.where(x > 0, 0.0, 1.0)
        return self.proj(x + mask)


m = Block().half()
print(m(torch.zeros(2, 4, dtype=torch.half)).dtype)
