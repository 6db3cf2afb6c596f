"""Joint lognormal beliefs about multiplicative factors, narrowed by measurements (Laplace).

The logs of the factors are jointly Gaussian: ``mean`` and ``cov``. Given residuals that are
Gaussian with a known noise sd, ``update`` returns the Laplace approximation of the posterior:
the maximum a posteriori point, found by ``scipy.optimize.least_squares`` on the data
residuals stacked with the prior's whitened residuals, and the inverse of J'J there as its
covariance. When the residuals are linear in the logs this is the exact conjugate posterior.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, cho_solve, solve_triangular
from scipy.optimize import least_squares


@dataclass
class LogBeliefs:
    """Gaussian belief about the logs of named multiplicative factors."""

    names: tuple[str, ...]
    mean: np.ndarray  # log of each factor's median
    cov: np.ndarray  # covariance of the logs

    @classmethod
    def prior(cls, **median_and_sd: tuple[float, float]) -> LogBeliefs:
        """Independent lognormal priors, each given as (median, log-sd)."""
        names = tuple(median_and_sd)
        mean = np.log([float(median_and_sd[k][0]) for k in names])
        sd = np.array([float(median_and_sd[k][1]) for k in names])
        return cls(names, mean, np.diag(sd**2))

    def index(self, name: str) -> int:
        """Position of ``name`` in ``mean``."""
        return self.names.index(name)

    def sd(self, name: str) -> float:
        """Marginal log-sd of one factor."""
        i = self.index(name)
        return float(np.sqrt(self.cov[i, i]))

    def log_sd(self, grads: list[np.ndarray]) -> np.ndarray:
        """sd of a log quantity whose gradient in the logs is ``grads`` (delta method)."""
        var = 0.0
        for i, gi in enumerate(grads):
            var = var + gi * gi * self.cov[i, i]
            for j in range(i):
                var = var + 2.0 * gi * grads[j] * self.cov[i, j]
        return np.sqrt(var)

    def update(self, residuals: Callable[[np.ndarray], np.ndarray], noise_sd: float) -> LogBeliefs:
        """Posterior after data whose ``residuals(log_factors)`` are N(0, noise_sd**2)."""
        if residuals(self.mean).size == 0:
            return self
        chol = cho_factor(self.cov, lower=True)
        lower = np.tril(chol[0])

        def stacked(theta: np.ndarray) -> np.ndarray:
            prior = solve_triangular(lower, theta - self.mean, lower=True)
            return np.concatenate([residuals(theta) / noise_sd, prior])

        sol = least_squares(stacked, self.mean, jac="3-point")
        precision = sol.jac.T @ sol.jac
        cov = cho_solve(cho_factor(precision), np.eye(len(self.names)))
        return LogBeliefs(self.names, sol.x, 0.5 * (cov + cov.T))
