from .optimizer import Optimizer


class SGD(Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, {"lr": lr})
        self.seen = []  # ccshim's step number as seen inside each step

    def step(self, closure=None):
        import ctypes
        try:
            self.seen.append(int(ctypes.CDLL(None).ccshim_step_current()))
        except AttributeError:
            self.seen.append(None)
        self.params = [p - self.defaults["lr"] for p in self.params]
