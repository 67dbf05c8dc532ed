"""A Hugging Face Accelerate program as the library's quick tour writes it: nothing in it knows
the launcher; `accelerate` reads the variables torchrun sets (RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT). Prints one JSON line per process at the end."""
import json
import os

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    x = torch.linspace(-1, 1, 128).unsqueeze(1)
    data = DataLoader(TensorDataset(x, 2 * x + 1), batch_size=16, shuffle=True)
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer, data = accelerator.prepare(model, optimizer, data)
    for _ in range(3):
        for xb, yb in data:
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
    total = accelerator.reduce(torch.tensor([1.0]), reduction="sum")
    print(json.dumps({
        "process_index": accelerator.process_index, "num_processes": accelerator.num_processes,
        "local_process_index": accelerator.local_process_index, "distributed": accelerator.distributed_type.value,
        "reduced": float(total.item()), "loss": float(loss.item()),
        "node_rank": os.environ.get("GROUP_RANK"),
    }), flush=True)
    accelerator.wait_for_everyone()
    accelerator.end_training()  # as Accelerate's examples end: the process group goes down cleanly


if __name__ == "__main__":
    main()
