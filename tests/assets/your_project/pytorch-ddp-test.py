# A researcher's own DDP script, written as the cluster documentation's pytorch-ddp-test.py is:
# its own argparse, ranks from SLURM_PROCID and SLURM_LOCALID, torchvision's CIFAR10 from ./data,
# init_process_group with an explicit rank and world size. It knows nothing of the course; only
# the GPU lines are made device-agnostic so that it runs on a CPU-only cluster too.
import argparse
import hashlib
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data.distributed
import torchvision.transforms as transforms
from torch.utils.data import DataLoader
from torchvision.datasets import CIFAR10

parser = argparse.ArgumentParser(description="cifar10 classification models, ddp test")
parser.add_argument("--lr", default=0.1, type=float, help="")
parser.add_argument("--batch_size", type=int, default=64, help="")
parser.add_argument("--max_epochs", type=int, default=1, help="")
parser.add_argument("--max_batches", type=int, default=5, help="")
parser.add_argument("--init_method", default="tcp://127.0.0.1:3456", type=str, help="")
parser.add_argument("--dist-backend", default="gloo", type=str, help="")
parser.add_argument("--world_size", default=1, type=int, help="")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def main():
    args = parser.parse_args()
    local_rank = int(os.environ.get("SLURM_LOCALID"))
    rank = int(os.environ.get("SLURM_PROCID"))
    use_cuda = torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(local_rank)
    print(f"From Rank: {rank}, ==> Initializing Process Group...", flush=True)
    dist.init_process_group(
        backend=args.dist_backend,
        init_method=args.init_method,
        world_size=args.world_size,
        rank=rank,
    )
    torch.manual_seed(0)
    net = Net().cuda() if use_cuda else Net()
    net = torch.nn.parallel.DistributedDataParallel(
        net, device_ids=[local_rank] if use_cuda else None
    )
    transform_train = transforms.Compose(
        [transforms.ToTensor(), transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))]
    )
    dataset_train = CIFAR10(root="./data", train=True, download=False, transform=transform_train)
    train_sampler = torch.utils.data.distributed.DistributedSampler(dataset_train)
    train_loader = DataLoader(dataset_train, batch_size=args.batch_size, sampler=train_sampler)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    for epoch in range(args.max_epochs):
        train_sampler.set_epoch(epoch)
        for batch_idx, (inputs, targets) in enumerate(train_loader):
            if batch_idx == args.max_batches:
                break
            if use_cuda:
                inputs, targets = inputs.cuda(), targets.cuda()
            loss = criterion(net(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"From Rank: {rank}, epoch {epoch} loss {loss.item():.4f}", flush=True)
    digest = hashlib.sha256()
    for p in net.module.parameters():
        digest.update(p.detach().cpu().numpy().tobytes())
    print(
        f"From Rank: {rank}, world {dist.get_world_size()}, checksum {digest.hexdigest()[:16]}",
        flush=True,
    )
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
