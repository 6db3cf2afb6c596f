"""The training models of the team's reference GPU measurements, rebuilt in code (random weights).

The reference measurements (Pollux and Sia artifacts, ``../shared/reference/measurements``)
name six models; the shapes below are the standard ones for those names, written from their
papers, so that their facts (parameters, the op mix per class) can be computed here:

  cifar10      ResNet-18 for 32x32 inputs (He et al., CVPR'16, with the CIFAR stem: a 3x3 first
               convolution and no max-pool), 10 classes, SGD with momentum
  imagenet     ResNet-50 (He et al.), 224x224 inputs, 1000 classes, SGD with momentum
  bert         BERT-base (Devlin et al., NAACL'19: 12 layers, hidden 768, 12 heads, feed-forward
               3072, vocabulary 30522) with a span head, SQuAD's usual 384 tokens, AdamW
  ncf          NeuMF (He et al., WWW'17): GMF and a 4-layer MLP tower over user and item
               embeddings, MovieLens-1M sizes (6040 users, 3706 items), predictive factors 8
  yolov3       YOLOv3 (Redmon and Farhadi, 2018): Darknet-53 backbone and the three-scale
               feature-pyramid heads at 416x416, 20 classes (PASCAL VOC), SGD with momentum
  deepspeech2  DeepSpeech2 (Amodei et al., ICML'16) as in deepspeech.pytorch: two 2-D
               convolutions over a 161-bin spectrogram, five bidirectional LSTM layers of 1024,
               29 characters, 400 frames (4 s), SGD with momentum

Details the measurements do not state (NeuMF's sizes, BERT's sequence length, YOLOv3's class
count and DeepSpeech2's utterance length) are the usual choices. Two losses are stand-ins of
the same shape: YOLOv3's box loss is a mean squared error on its three heads, DeepSpeech2's CTC
a per-frame cross-entropy (CTC has no meta-device kernel); both are a negligible part of a
step's work next to the network. Nothing is downloaded.
"""

from __future__ import annotations

import torch
from torch import nn

from srifty_kit.measure.zoo import ModelSpec


def _sgd(params):
    """SGD with momentum and weight decay, the reference runs' optimizer for CNNs."""
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
        """One forward pass over ``x`` (a batch), as the reference training step."""
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
        """One forward pass over ``ids`` (a batch), as the reference training step."""
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
        """One forward pass over ``pair`` (a batch), as the reference training step."""
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


def _conv_bn(cin: int, cout: int, k: int, s: int = 1) -> nn.Sequential:
    """Darknet's convolution, batch norm, leaky ReLU."""
    return nn.Sequential(
        nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(0.1)
    )


class _DarkRes(nn.Module):
    """Darknet-53's residual unit: 1x1 halving, 3x3 restoring, plus the input."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.body = nn.Sequential(_conv_bn(c, c // 2, 1), _conv_bn(c // 2, c, 3))

    def forward(self, x):
        """One forward pass over ``x`` (a batch), as the reference training step."""
        return x + self.body(x)


def _stage(cin: int, cout: int, blocks: int) -> nn.Sequential:
    return nn.Sequential(_conv_bn(cin, cout, 3, 2), *(_DarkRes(cout) for _ in range(blocks)))


def _head_set(cin: int, mid: int) -> nn.Sequential:
    """The five alternating 1x1/3x3 convolutions before each YOLO output."""
    return nn.Sequential(
        _conv_bn(cin, mid, 1),
        _conv_bn(mid, mid * 2, 3),
        _conv_bn(mid * 2, mid, 1),
        _conv_bn(mid, mid * 2, 3),
        _conv_bn(mid * 2, mid, 1),
    )


class _YoloV3(nn.Module):
    """Darknet-53 and the three detection scales (strides 32, 16, 8), 3 anchors each."""

    def __init__(self, classes: int = 20) -> None:
        super().__init__()
        out = 3 * (5 + classes)
        self.stem = _conv_bn(3, 32, 3)
        self.s1, self.s2 = _stage(32, 64, 1), _stage(64, 128, 2)
        self.s3, self.s4, self.s5 = _stage(128, 256, 8), _stage(256, 512, 8), _stage(512, 1024, 4)
        self.h5, self.h4, self.h3 = _head_set(1024, 512), _head_set(768, 256), _head_set(384, 128)
        self.o5 = nn.Sequential(_conv_bn(512, 1024, 3), nn.Conv2d(1024, out, 1))
        self.o4 = nn.Sequential(_conv_bn(256, 512, 3), nn.Conv2d(512, out, 1))
        self.o3 = nn.Sequential(_conv_bn(128, 256, 3), nn.Conv2d(256, out, 1))
        self.l5, self.l4 = _conv_bn(512, 256, 1), _conv_bn(256, 128, 1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")

    def forward(self, x):
        """One forward pass over ``x`` (a batch), as the reference training step."""
        c3 = self.s3(self.s2(self.s1(self.stem(x))))
        c4 = self.s4(c3)
        p5 = self.h5(self.s5(c4))
        p4 = self.h4(torch.cat([self.up(self.l5(p5)), c4], 1))
        p3 = self.h3(torch.cat([self.up(self.l4(p4)), c3], 1))
        return self.o5(p5), self.o4(p4), self.o3(p3)


def yolov3(size: int = 416, classes: int = 20) -> ModelSpec:
    """YOLOv3 on ``size`` x ``size`` images; the targets are tensors shaped like its heads."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    out = 3 * (5 + classes)

    def make_batch(b: int):
        x = torch.randn(b, 3, size, size, generator=gen)
        grids = [size // s for s in (32, 16, 8)]
        return x, tuple(torch.rand(b, out, g, g, generator=gen) for g in grids)

    def loss_fn(outputs, targets):
        return sum(nn.functional.mse_loss(o, t) for o, t in zip(outputs, targets, strict=True))

    return ModelSpec(_YoloV3(classes), make_batch, loss_fn, _sgd, "yolov3")


class _DeepSpeech2(nn.Module):
    """Two strided 2-D convolutions, five bidirectional LSTMs (sequence-wise batch norm
    between them), a linear layer to the characters."""

    def __init__(self, freq: int = 161, hidden: int = 1024, layers: int = 5, chars: int = 29):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 32, (41, 11), (2, 2), (20, 5)),
            nn.BatchNorm2d(32),
            nn.Hardtanh(0, 20),
            nn.Conv2d(32, 32, (21, 11), (2, 1), (10, 5)),
            nn.BatchNorm2d(32),
            nn.Hardtanh(0, 20),
        )
        f = (freq + 2 * 20 - 41) // 2 + 1
        f = (f + 2 * 10 - 21) // 2 + 1
        sizes = [32 * f] + [hidden] * (layers - 1)
        self.norms = nn.ModuleList(
            [nn.Identity()] + [nn.BatchNorm1d(hidden) for _ in range(layers - 1)]
        )
        self.rnns = nn.ModuleList(
            nn.LSTM(n, hidden, batch_first=True, bidirectional=True) for n in sizes
        )
        self.fc = nn.Sequential(nn.BatchNorm1d(hidden), nn.Linear(hidden, chars, bias=False))

    def forward(self, spec):
        """One forward pass over ``spec`` (a batch), as the reference training step."""
        x = self.conv(spec)  # (batch, channels, freq, time)
        b, c, f, t = x.shape
        x = x.reshape(b, c * f, t).transpose(1, 2)  # (batch, time, features)
        for norm, rnn in zip(self.norms, self.rnns, strict=True):
            x = norm(x.transpose(1, 2)).transpose(1, 2)
            x, _ = rnn(x)
            x = x.view(b, t, 2, -1).sum(2)  # the two directions summed, as deepspeech.pytorch
        x = self.fc[0](x.transpose(1, 2)).transpose(1, 2)
        return self.fc[1](x)  # (batch, time, chars) logits


def deepspeech2(frames: int = 400, freq: int = 161, chars: int = 29) -> ModelSpec:
    """DeepSpeech2 on ``frames`` spectrogram frames; per-frame character targets."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    out_frames = (frames + 2 * 5 - 11) // 2 + 1

    def make_batch(b: int):
        spec = torch.randn(b, 1, freq, frames, generator=gen)
        return spec, torch.randint(0, chars, (b, out_frames), generator=gen)

    def loss_fn(logits, targets):
        return nn.functional.cross_entropy(logits.reshape(-1, chars), targets.reshape(-1))

    return ModelSpec(_DeepSpeech2(freq, chars=chars), make_batch, loss_fn, _sgd, "deepspeech2")


REFERENCE_MODELS = {
    "cifar10": cifar10,
    "imagenet": imagenet,
    "bert": bert,
    "ncf": ncf,
    "yolov3": yolov3,
    "deepspeech2": deepspeech2,
}
