"""The training models of the reference g4dn.12xlarge traces, rebuilt in code with random inputs.

The traces (Pollux artifact, see ../shared/reference/measurements/README.md) name the models;
the shapes below are the standard ones for those names, written here from their papers:

  cifar10   ResNet-18 for 32x32 inputs (He et al., CVPR'16, with the CIFAR stem: a 3x3 first
            convolution and no max-pool), 10 classes, SGD with momentum
  imagenet  ResNet-50 (He et al.), 224x224 inputs, 1000 classes, SGD with momentum
  bert      BERT-base (Devlin et al., NAACL'19: 12 layers, hidden 768, 12 heads, feed-forward
            3072, vocabulary 30522) with a span head, SQuAD's usual 384 tokens, AdamW
  ncf       NeuMF (He et al., WWW'17): GMF and a 4-layer MLP tower over user and item
            embeddings, MovieLens-1M sizes (6040 users, 3706 items), predictive factors 8

Weights are random (nothing is downloaded); the profiler needs only the shapes. Details the
traces do not state (the exact NeuMF sizes, BERT's sequence length) are the usual choices.
"""

from __future__ import annotations

import torch
from torch import nn

from srifty_kit.measure.zoo import ModelSpec


def _sgd(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=5e-4)


class _Block(nn.Module):
    """A ResNet basic (two 3x3) or bottleneck (1x1, 3x3, 1x1 with 4x expansion) block."""

    def __init__(self, cin: int, width: int, stride: int, bottleneck: bool):
        super().__init__()
        cout = width * 4 if bottleneck else width
        if bottleneck:
            shapes = [(cin, width, 1, 1), (width, width, 3, stride), (width, cout, 1, 1)]
        else:
            shapes = [(cin, width, 3, stride), (width, cout, 3, 1)]
        layers = []
        for i, (a, b, k, s) in enumerate(shapes):
            layers += [nn.Conv2d(a, b, k, s, k // 2, bias=False), nn.BatchNorm2d(b)]
            if i < len(shapes) - 1:
                layers.append(nn.ReLU(inplace=True))
        self.body = nn.Sequential(*layers)
        self.skip = nn.Identity()
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


def _resnet(depths: list[int], bottleneck: bool, classes: int, cifar: bool) -> nn.Module:
    if cifar:
        stem = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(True)]
    else:
        stem = [
            nn.Conv2d(3, 64, 7, 2, 3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(True),
            nn.MaxPool2d(3, 2, 1),
        ]
    layers, cin = list(stem), 64
    for stage, depth in enumerate(depths):
        width = 64 * 2**stage
        for i in range(depth):
            block = _Block(cin, width, 2 if (i == 0 and stage > 0) else 1, bottleneck)
            layers.append(block)
            cin = width * 4 if bottleneck else width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def _images(size: int, classes: int):
    gen = torch.Generator().manual_seed(0)

    def make_batch(b: int):
        x = torch.randn(b, 3, size, size, generator=gen)
        return x, torch.randint(0, classes, (b,), generator=gen)

    return make_batch


def cifar10() -> ModelSpec:
    """ResNet-18 on 32x32 images, 10 classes."""
    torch.manual_seed(0)
    model = _resnet([2, 2, 2, 2], False, 10, cifar=True)
    return ModelSpec(model, _images(32, 10), nn.CrossEntropyLoss(), _sgd, "cifar10")


def imagenet() -> ModelSpec:
    """ResNet-50 on 224x224 images, 1000 classes."""
    torch.manual_seed(0)
    model = _resnet([3, 4, 6, 3], True, 1000, cifar=False)
    return ModelSpec(model, _images(224, 1000), nn.CrossEntropyLoss(), _sgd, "imagenet")


class _BertQA(nn.Module):
    def __init__(self, vocab=30522, hidden=768, layers=12, heads=12, ff=3072, seq=384):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(seq, hidden)
        self.segments = nn.Embedding(2, hidden)
        self.norm = nn.LayerNorm(hidden)
        layer = nn.TransformerEncoderLayer(
            hidden, heads, ff, dropout=0.1, activation="gelu", batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.span = nn.Linear(hidden, 2)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.norm(self.tokens(ids) + self.positions(pos) + self.segments(torch.zeros_like(ids)))
        start, end = self.span(self.encoder(x)).unbind(-1)
        return start, end


def _span_loss(outputs, targets):
    start, end = outputs
    return (
        nn.functional.cross_entropy(start, targets[:, 0])
        + nn.functional.cross_entropy(end, targets[:, 1])
    ) / 2


def bert(seq: int = 384) -> ModelSpec:
    """BERT-base with a SQuAD span head on ``seq`` random tokens."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)

    def make_batch(b: int):
        ids = torch.randint(0, 30522, (b, seq), generator=gen)
        return ids, torch.randint(0, seq, (b, 2), generator=gen)

    def adamw(params):
        return torch.optim.AdamW(params, lr=3e-5)

    return ModelSpec(_BertQA(seq=seq), make_batch, _span_loss, adamw, "bert")


class _NeuMF(nn.Module):
    def __init__(self, users=6040, items=3706, factors=8, layers=(64, 32, 16, 8)):
        super().__init__()
        self.gmf_user, self.gmf_item = nn.Embedding(users, factors), nn.Embedding(items, factors)
        half = layers[0] // 2
        self.mlp_user, self.mlp_item = nn.Embedding(users, half), nn.Embedding(items, half)
        tower = []
        for a, b in zip(layers, layers[1:], strict=False):
            tower += [nn.Linear(a, b), nn.ReLU()]
        self.tower = nn.Sequential(*tower)
        self.out = nn.Linear(factors + layers[-1], 1)

    def forward(self, pair):
        u, i = pair[:, 0], pair[:, 1]
        gmf = self.gmf_user(u) * self.gmf_item(i)
        mlp = self.tower(torch.cat([self.mlp_user(u), self.mlp_item(i)], dim=1))
        return self.out(torch.cat([gmf, mlp], dim=1)).squeeze(1)


def ncf() -> ModelSpec:
    """NeuMF on MovieLens-1M-sized embeddings, implicit feedback (binary labels)."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)

    def make_batch(b: int):
        pair = torch.stack(
            [
                torch.randint(0, 6040, (b,), generator=gen),
                torch.randint(0, 3706, (b,), generator=gen),
            ],
            dim=1,
        )
        return pair, torch.randint(0, 2, (b,), generator=gen).float()

    def adam(params):
        return torch.optim.Adam(params, lr=1e-3)

    return ModelSpec(_NeuMF(), make_batch, nn.BCEWithLogitsLoss(), adam, "ncf")


TRACE_MODELS = {"cifar10": cifar10, "imagenet": imagenet, "bert": bert, "ncf": ncf}
