"""Where a script run as written gets its batch size (script_runner.ScriptRun): the batch
the model takes, not a transform's sample, nor a sequence-first model's time steps."""

from script_folder import ScriptFolderCase
from wavecast_tracer.tracer import run_trace


class BatchSizeTest(ScriptFolderCase):
    def test_the_batch_size_is_the_batchs_not_a_transforms(self):
        # torchvision's transforms are modules that run on each image, inside the DataLoader.
        path = self.write("""
            import torch
            import torch.nn as nn
            from torch.utils.data import DataLoader, Dataset

            class Scale(nn.Module):
                def forward(self, image):
                    return image * 2

            class Images(Dataset):
                def __init__(self):
                    self.transform = Scale()
                def __len__(self):
                    return 64
                def __getitem__(self, index):
                    return self.transform(torch.randn(3, 8, 8)), index % 10

            model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10)).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for images, labels in DataLoader(Images(), batch_size=16, num_workers=2):
                loss = nn.functional.cross_entropy(model(images.cuda()), labels.cuda())
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            """)
        trace = run_trace(path)
        self.assertEqual(trace["batch_size"], 16)
        modules = {op.get("module") for op in trace["ops"] if op["phase"] == "forward"}
        self.assertNotIn("transform", " ".join(m for m in modules if m))

    def test_a_batch_of_per_sample_images_counts_its_images(self):
        # A detection collate, tuple(zip(*samples)): a tuple of 4 images of [3, 8, 8] each,
        # whose first dimension (3) is no batch's.
        path = self.write("""
            import torch
            import torch.nn as nn
            from torch.utils.data import DataLoader, Dataset

            class Images(Dataset):
                def __len__(self):
                    return 16
                def __getitem__(self, index):
                    return torch.randn(3, 8, 8), {"labels": torch.tensor([index % 10])}

            model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10)).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            loader = DataLoader(Images(), batch_size=4, collate_fn=lambda samples: tuple(zip(*samples)))
            for images, targets in loader:
                labels = torch.cat([t["labels"] for t in targets]).cuda()
                loss = nn.functional.cross_entropy(model(torch.stack(images).cuda()), labels)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            """)
        trace = run_trace(path)
        self.assertEqual(trace["batch_size"], 4)
        self.assertEqual(trace["samples_per_iteration"], 4)

    def test_a_sequence_first_transformer_counts_its_sequences(self):
        # nn.TransformerEncoder's default layout: 12 positions of 3 sequences; and a model
        # fed batch first, whose batch is its first dimension.
        for batch_first, shape in ((False, "12, 3, 16"), (True, "3, 12, 16")):
            with self.subTest(batch_first=batch_first):
                path = self.write(f"""
                    import torch
                    import torch.nn as nn

                    layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first={batch_first})
                    model = nn.TransformerEncoder(layer, 2).cuda()
                    optimizer = torch.optim.Adam(model.parameters())
                    for step in range(3):
                        model(torch.randn({shape}, device="cuda")).sum().backward()
                        optimizer.step()
                        optimizer.zero_grad()
                    """)
                trace = run_trace(path)
                self.assertEqual((trace["batch_size"], trace["samples_per_iteration"]), (3, 3))

    def test_a_model_given_its_tensors_by_keyword_counts_the_batch_its_embedding_takes(self):
        # Hugging Face models are called as `model(input_ids=ids, labels=ids)`: no positional
        # tensor, so the batch is the first one a module inside takes.
        path = self.write("""
            import torch
            import torch.nn as nn

            class LanguageModel(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.embed = nn.Embedding(100, 16)
                    self.head = nn.Linear(16, 100)

                def forward(self, input_ids=None, labels=None):
                    logits = self.head(self.embed(input_ids))
                    return nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())

            model = LanguageModel().cuda()
            optimizer = torch.optim.AdamW(model.parameters())
            for step in range(3):
                ids = torch.randint(0, 100, (6, 8), device="cuda")
                model(input_ids=ids, labels=ids).backward()
                optimizer.step()
                optimizer.zero_grad()
            """)
        trace = run_trace(path)
        self.assertEqual((trace["batch_size"], trace["samples_per_iteration"]), (6, 6))

    def test_a_recorded_step_on_the_loaders_last_partial_batch_says_so(self):
        # 40 samples in batches of 32: the second step trains on the last 8, for one epoch,
        # or for every epoch; 64 samples give two full batches, and no note.
        for samples, epochs, expected in ((40, 1, 8), (40, 3, 8), (64, 1, 32)):
            with self.subTest(samples=samples, epochs=epochs):
                path = self.write(f"""
                    import torch
                    import torch.nn as nn
                    from torch.utils.data import DataLoader, TensorDataset

                    data = TensorDataset(torch.randn({samples}, 32), torch.randint(0, 10, ({samples},)))
                    model = nn.Linear(32, 10).cuda()
                    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                    for epoch in range({epochs}):
                        for x, y in DataLoader(data, batch_size=32):  # the loop
                            loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                            loss.backward()
                            optimizer.step()
                            optimizer.zero_grad()
                    """)
                trace = run_trace(path)
                self.assertEqual(trace["batch_size"], expected)
                notes = [w for w in trace["warnings"] if w["kind"] == "partial_batch"]
                if expected == 32:
                    self.assertEqual(notes, [])
                    continue
                with open(path) as f:
                    line = next(n for n, text in enumerate(f, 1) if "# the loop" in text)
                self.assertEqual([(n["line"], n["count"]) for n in notes], [(line, 32)])
