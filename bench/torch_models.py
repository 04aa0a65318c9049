"""PyTorch twins of the C++ model zoo (runtime/models), layer for layer and init for init.

They exist for side-by-side training-throughput benchmarks against the C++ runtime, so any
change to a network in runtime/models must be mirrored here (the parameter counts printed by
`python3 torch_models.py` must equal the C++ ones pinned in tests/runtime/models).

    import torch_models
    net = torch_models.make_model("resnet20", num_classes=10, in_channels=3)

Needs PyTorch >= 1.13 (Debian's python3-torch: run with /usr/bin/python3).
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["MODEL_NAMES", "make_model", "parameter_count"]


class Classifier(nn.Module):
    """Images N x C x H x W -> logits N x num_classes, as cifar::models::Classifier."""

    def init_from_data(self, images):
        """Data-dependent initialisation (fastnet's patch whitening); a no-op elsewhere."""


# --- simplecnn: Keras' cifar10_cnn.py -------------------------------------------------------


class SimpleCnn(Classifier):
    def __init__(self, num_classes=10, in_channels=3, image_size=32):
        super().__init__()
        side = ((image_size - 2) // 2 - 2) // 2
        if side < 1:
            raise ValueError(f"simplecnn needs images of at least 10x10, got {image_size}")
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, 3, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3), nn.ReLU(),
            nn.MaxPool2d(2), nn.Dropout(0.25),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
            nn.Conv2d(64, 64, 3), nn.ReLU(),
            nn.MaxPool2d(2), nn.Dropout(0.25),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * side * side, 512), nn.ReLU(),
            nn.Dropout(0.5), nn.Linear(512, num_classes),
        )
        # Keras: Glorot-uniform kernels, zero biases.
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.classifier(self.features(x))


# --- alexnet: the TensorFlow CIFAR-10 tutorial (cifar10.py inference()) ----------------------


def max_pool_tf_same(x, size=3, stride=2):
    """tf.nn.max_pool(..., padding='SAME'): minimal padding, the odd pixel at the end, -inf."""

    def padding(side):
        out = (side + stride - 1) // stride
        return max((out - 1) * stride + size - side, 0)

    ph, pw = padding(x.size(2)), padding(x.size(3))
    x = F.pad(x, (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2), value=-math.inf)
    return F.max_pool2d(x, size, stride)


def _lrn():
    # tf.nn.lrn(depth_radius=4, bias=1, alpha=0.001/9, beta=0.75); torch divides alpha by size.
    size = 2 * 4 + 1
    return nn.LocalResponseNorm(size, alpha=0.001 / 9.0 * size, beta=0.75, k=1.0)


class AlexNet(Classifier):
    def __init__(self, num_classes=10, in_channels=3, image_size=32):
        super().__init__()
        side = (((image_size + 1) // 2) + 1) // 2
        self.conv1 = nn.Conv2d(in_channels, 64, 5, padding=2)
        self.norm1 = _lrn()
        self.conv2 = nn.Conv2d(64, 64, 5, padding=2)
        self.norm2 = _lrn()
        self.local3 = nn.Linear(64 * side * side, 384)
        self.local4 = nn.Linear(384, 192)
        self.softmax_linear = nn.Linear(192, num_classes)
        with torch.no_grad():
            for layer, std, bias in ((self.conv1, 5e-2, 0.0), (self.conv2, 5e-2, 0.1),
                                     (self.local3, 0.04, 0.1), (self.local4, 0.04, 0.1),
                                     (self.softmax_linear, 1 / 192.0, 0.0)):
                nn.init.trunc_normal_(layer.weight, std=std, a=-2 * std, b=2 * std)
                layer.bias.fill_(bias)

    def forward(self, x):
        x = self.norm1(max_pool_tf_same(F.relu(self.conv1(x))))
        x = max_pool_tf_same(self.norm2(F.relu(self.conv2(x))))
        x = F.relu(self.local3(x.flatten(1)))
        x = F.relu(self.local4(x))
        return self.softmax_linear(x)


# --- resnet23: nnabla-examples' CIFAR-10 ResNet-23 ------------------------------------------


class ResUnit(nn.Module):
    def __init__(self, channels, downsample):
        super().__init__()
        half = channels // 2
        self.conv1 = nn.Conv2d(channels, half, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(half)
        self.conv2 = nn.Conv2d(half, half, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(half)
        self.conv3 = nn.Conv2d(half, channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(channels)
        self.downsample = downsample

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.relu(self.bn2(self.conv2(h)))
        h = F.relu(self.bn3(self.conv3(h)) + x)
        return F.max_pool2d(h, 2, 2) if self.downsample else h


class ResNet23(Classifier):
    def __init__(self, num_classes=10, in_channels=3, image_size=32):
        super().__init__()
        maps = 64
        self.conv1 = nn.Conv2d(in_channels, maps, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(maps)
        self.units = nn.Sequential(*[ResUnit(maps, unit % 2 == 1) for unit in range(7)])
        self.affine = nn.Linear(maps, num_classes)
        # nnabla: Glorot-uniform weights, zero biases.
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.xavier_uniform_(m.weight)
        nn.init.zeros_(self.affine.bias)

    def forward(self, x):
        h = self.units(F.relu(self.bn1(self.conv1(x))))
        return self.affine(F.adaptive_avg_pool2d(h, 1).flatten(1))


# --- resnet20 / resnet56: He et al. 2016, as akamaster/pytorch_resnet_cifar10 -----------------


class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.pad_channels = planes // 4 if stride != 1 or in_planes != planes else None

    def shortcut(self, x):
        if self.pad_channels is None:
            return x
        p = self.pad_channels
        return F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, p, p))  # option A

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet(Classifier):
    def __init__(self, depth, num_classes=10, in_channels=3, image_size=32):
        super().__init__()
        if depth < 8 or (depth - 2) % 6:
            raise ValueError(f"CIFAR ResNet depth must be 6n + 2, got {depth}")
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(in_channels, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        in_planes = 16
        for i, planes in enumerate((16, 32, 64), start=1):
            blocks = []
            for b in range(n):
                blocks.append(BasicBlock(in_planes, planes, 2 if b == 0 and planes != 16 else 1))
                in_planes = planes
            self.add_module(f"layer{i}", nn.Sequential(*blocks))
        self.linear = nn.Linear(64, num_classes)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        return self.linear(F.adaptive_avg_pool2d(out, 1).flatten(1))


# --- fastnet: airbench94 ---------------------------------------------------------------------


def _airbench_conv(in_ch, out_ch, kernel=3, whitening=False):
    conv = nn.Conv2d(in_ch, out_ch, kernel, padding=0 if whitening else kernel // 2,
                     bias=whitening)
    with torch.no_grad():
        if conv.bias is not None:
            conv.bias.zero_()
        nn.init.dirac_(conv.weight[:in_ch])
    return conv


def _airbench_batch_norm(channels, momentum=0.6):
    norm = nn.BatchNorm2d(channels, eps=1e-12, momentum=1 - momentum)
    norm.weight.requires_grad = False
    return norm


class ConvGroup(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.conv1 = _airbench_conv(in_ch, out_ch)
        self.norm1 = _airbench_batch_norm(out_ch)
        self.conv2 = _airbench_conv(out_ch, out_ch)
        self.norm2 = _airbench_batch_norm(out_ch)

    def forward(self, x):
        x = F.gelu(self.norm1(F.max_pool2d(self.conv1(x), 2)))
        return F.gelu(self.norm2(self.conv2(x)))


class FastNet(Classifier):
    KERNEL = 2
    EPS = 5e-4

    def __init__(self, num_classes=10, in_channels=3, image_size=32):
        super().__init__()
        if (image_size - self.KERNEL + 1) // 8 // 3 != 1:
            raise ValueError(f"fastnet needs images of 25 to 48 pixels a side, got {image_size}")
        width = 2 * in_channels * self.KERNEL ** 2
        self.whiten = _airbench_conv(in_channels, width, self.KERNEL, whitening=True)
        self.whiten.weight.requires_grad = False
        self.group1 = ConvGroup(width, 64)
        self.group2 = ConvGroup(64, 256)
        self.group3 = ConvGroup(256, 256)
        self.head = nn.Linear(256, num_classes, bias=False)

    def forward(self, x):
        x = F.gelu(self.whiten(x))
        x = self.group3(self.group2(self.group1(x)))
        x = F.max_pool2d(x, 3).flatten(1)
        return self.head(x) * (1 / 9)

    @torch.no_grad()
    def init_from_data(self, images):
        w = self.whiten.weight
        c, k = w.size(1), self.KERNEL
        patches = (images.to(w.device, torch.float).unfold(2, k, 1).unfold(3, k, 1)
                   .transpose(1, 3).reshape(-1, c * k * k))
        cov = (patches.T @ patches / patches.size(0)).double()
        eigenvalues, eigenvectors = torch.linalg.eigh(cov, UPLO="U")
        scale = (eigenvalues.flip(0) + self.EPS).rsqrt().unsqueeze(1)
        filters = (eigenvectors.T.flip(0) * scale).reshape(-1, c, k, k).to(w.dtype)
        w.copy_(torch.cat((filters, -filters)))


# --- registry ----------------------------------------------------------------------------------

_FACTORIES = {
    "simplecnn": SimpleCnn,
    "alexnet": AlexNet,
    "resnet23": ResNet23,
    "resnet20": lambda **kw: CifarResNet(20, **kw),
    "resnet56": lambda **kw: CifarResNet(56, **kw),
    "fastnet": FastNet,
}
MODEL_NAMES = list(_FACTORIES)


def make_model(name, num_classes=10, in_channels=3, image_size=32):
    if name not in _FACTORIES:
        raise ValueError(f"unknown model '{name}'; known models: {', '.join(MODEL_NAMES)}")
    return _FACTORIES[name](num_classes=num_classes, in_channels=in_channels,
                            image_size=image_size)


def parameter_count(model, trainable_only=True):
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


if __name__ == "__main__":
    print(f"{'model':<10} {'input':>8} {'trainable':>10} {'total':>10}")
    for name in MODEL_NAMES:
        for channels, side in ((3, 32), (1, 28)) + (((3, 24),) if name == "alexnet" else ()):
            net = make_model(name, 10, channels, side)
            net(torch.randn(2, channels, side, side))  # the architecture really runs
            print(f"{name:<10} {f'{channels}x{side}x{side}':>8} {parameter_count(net):>10,} "
                  f"{parameter_count(net, False):>10,}")
