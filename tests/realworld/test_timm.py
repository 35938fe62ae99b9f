"""timm models, built by name without pretrained weights, traced in shape mode and checked
as model_checks.py says."""

import unittest

from model_checks import model_tests, stop_tracing, timm


def tearDownModule():
    stop_tracing()


class TimmModel:
    TIMM_NAME = None

    @classmethod
    def timm_args(cls):
        return {}

    @classmethod
    def build(cls):
        return timm.create_model(cls.TIMM_NAME, pretrained=False, num_classes=1000, **cls.timm_args())


class ViT(TimmModel, model_tests(attention=True), unittest.TestCase):
    NAME, BATCH = "vit_timm", 32
    TIMM_NAME = "vit_base_patch16_224"
    FORWARD_LINES = ("outputs = model(images)", "loss = criterion(outputs, targets)")
    LOSS_LINE = "loss = criterion(outputs, targets)"
    NEXT = ("convnext_timm", 32)

    @classmethod
    def timm_args(cls):
        return {"depth": cls.script.DEPTH}

    @property
    def ATTENTION_LAYERS(self):  # noqa: N802
        return self.script.DEPTH

    def test_parameter_count_formula(self):
        if self.script.DEPTH == 12:
            self.assertEqual(self.param_count(), 86_567_656)  # as published for ViT-B/16
        d, patches, depth = 768, (224 // 16) ** 2, self.script.DEPTH
        embed = 3 * 16 * 16 * d + d + d + (patches + 1) * d  # patch conv, class token, positions
        blocks = depth * (12 * d * d + 13 * d)
        self.assertEqual(embed + blocks + 2 * d + d * 1000 + 1000, self.param_count())


class ConvNeXt(TimmModel, model_tests(), unittest.TestCase):
    NAME, BATCH = "convnext_timm", 32
    TIMM_NAME = "convnext_tiny"
    FORWARD_LINES = ("outputs = model(images)", "loss = criterion(outputs, targets)")
    LOSS_LINE = "loss = criterion(outputs, targets)"
    NEXT = ("resnet_timm", 64)

    def test_parameter_count_is_convnext_tiny(self):
        self.assertEqual(self.param_count(), 28_589_128)  # as published for ConvNeXt-T

    def test_channels_last(self):
        convs = [op for op in self.ops() if op["name"] == "aten::convolution"]
        self.assertEqual(len(convs), 4 + 18)  # stem, 3 downsamples, 18 depthwise convs
        self.assertEqual(convs[0]["inputs"][0]["shape"], [32, 3, 224, 224])
        # channels_last input: not contiguous in the default (NCHW) format.
        self.assertFalse(convs[0]["inputs"][0]["contiguous"])


class ResNet(TimmModel, model_tests(), unittest.TestCase):
    NAME, BATCH = "resnet_timm", 64
    TIMM_NAME = "resnet50"
    FORWARD_LINES = ("logits = model(images)", "loss = F.cross_entropy(logits, targets)")
    LOSS_LINE = "loss = F.cross_entropy(logits, targets)"

    def test_parameter_count_is_resnet50(self):
        self.assertEqual(self.param_count(), 25_557_032)  # torchvision's / timm's ResNet-50

    def test_convolutions(self):
        self.assertEqual(sum(op["name"] == "aten::convolution" for op in self.ops()), 53)
        self.assertEqual(sum(op["name"] == "aten::convolution_backward" for op in self.ops()), 53)


if __name__ == "__main__":
    unittest.main()
