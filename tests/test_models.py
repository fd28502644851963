import torch

from course_utils.models import Net, WideNet, count_parameters, parameter_hash


def test_net_matches_the_documentation_cnn():
    model = Net()
    assert model(torch.randn(4, 3, 32, 32)).shape == (4, 10)
    # conv 3->6 (5x5), conv 6->16 (5x5), fc 400->120->84->10
    assert count_parameters(model) == 456 + 2416 + 48120 + 10164 + 850


def test_widenet_shape_and_width():
    model = WideNet(width=8)
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    assert count_parameters(model) < count_parameters(WideNet(width=16))


def test_parameter_hash_sees_a_single_bit():
    torch.manual_seed(0)
    a = Net()
    torch.manual_seed(0)
    b = Net()
    assert parameter_hash(a) == parameter_hash(b)
    with torch.no_grad():
        flat = b.fc3.bias.view(torch.int32)
        flat[0] ^= 1  # flip the lowest mantissa bit of one parameter
    assert parameter_hash(a) != parameter_hash(b)
