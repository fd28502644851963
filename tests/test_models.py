import torch

from course_utils.models import Net, WideNet, count_parameters


def test_net_matches_the_documentation_cnn():
    model = Net()
    assert model(torch.randn(4, 3, 32, 32)).shape == (4, 10)
    # conv 3->6 (5x5), conv 6->16 (5x5), fc 400->120->84->10
    assert count_parameters(model) == 456 + 2416 + 48120 + 10164 + 850


def test_widenet_shape_and_width():
    model = WideNet(width=8)
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    assert count_parameters(model) < count_parameters(WideNet(width=16))
