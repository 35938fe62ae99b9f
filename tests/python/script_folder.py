"""What the tests of scripts run as written share: a folder per test to write the script
in, and a dataset whose batches are real."""

import os
import tempfile
import textwrap
import unittest

# A dataset whose samples are made in __getitem__, as files are read: its batches are real.
REAL_SAMPLES = """
import torch
from torch.utils.data import DataLoader, Dataset


class Samples(Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, index):
        return torch.randn(32), index % 10
"""


class ScriptFolderCase(unittest.TestCase):
    """Each test writes its script as train.py in a folder of its own."""

    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.directory.cleanup()

    def write(self, text):
        path = os.path.join(self.directory.name, "train.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path
