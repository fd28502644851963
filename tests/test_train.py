import pytest
import torch

from course_utils import data, models
from course_utils.train import Stats, evaluate, train_one_epoch


@pytest.fixture
def loader():
    return data.make_loader(data.SyntheticCIFAR10(size=512), batch_size=64)


def test_training_lowers_the_loss(loader):
    torch.manual_seed(0)
    model = models.Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    before = evaluate(model, loader, progress=False).loss
    for _ in range(4):
        stats = train_one_epoch(model, loader, opt, progress=False)
    assert evaluate(model, loader, progress=False).loss < before
    assert stats.images == 512 and stats.images_per_second > 0 and 0 <= stats.accuracy <= 1


def test_evaluate_leaves_parameters_alone(loader):
    model = models.Net()
    before = [p.clone() for p in model.parameters()]
    stats = evaluate(model, loader, progress=False)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert stats.loss == pytest.approx(2.3, abs=0.2)  # an untrained net guesses among 10 classes


def test_max_steps_limits_images(loader):
    model = models.Net()
    stats = train_one_epoch(
        model, loader, torch.optim.SGD(model.parameters(), lr=0.01), max_steps=2, progress=False
    )
    assert stats.images == 128


def test_bfloat16_autocast_runs_on_cpu(loader):
    model = models.Net()
    stats = train_one_epoch(
        model,
        loader,
        torch.optim.SGD(model.parameters(), lr=0.01),
        autocast_dtype=torch.bfloat16,
        max_steps=1,
        progress=False,
    )
    assert stats.images == 64


def test_empty_loader_is_an_error():
    model = models.Net()
    with pytest.raises(ValueError, match="yielded no batches"):
        evaluate(model, [], progress=False)


def test_stats_format():
    text = str(Stats(loss=0.5, accuracy=0.25, images=1000, seconds=0.5))
    assert text == "loss 0.5000  accuracy 25.0%  2,000 images/s"
