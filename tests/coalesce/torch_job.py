"""A training loop that knows nothing of ccshim (tests/coalesce/coalesce-torch.sh)."""
import torch.optim as optim

opt = optim.SGD([1.0, 2.0], lr=0.5)
for _ in range(3):
    opt.step()
print("seen", " ".join(str(s) for s in opt.seen))
print("params", " ".join("%g" % p for p in opt.params))
