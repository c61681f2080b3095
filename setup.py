"""noturningback: reversibility-aware RL (RAE / RAC) on a distributed Acme actor-learner system."""
from setuptools import find_packages, setup

setup(
    name='noturningback',
    version='0.1.0',
    description='Reversibility-aware RL (Grinsztajn et al., NeurIPS 2021) on Acme + Launchpad + Reverb.',
    python_requires='==3.10.*',
    packages=find_packages(include=['agents*', 'estimators*', 'envs*', 'launch*', 'experiments*']),
    py_modules=['noturningback_shim'],
    package_data={'envs': ['data/*.txt'], 'launch.runtime': ['native/*.c']},
    # Exact versions live in constraints.txt (see BUILD_NOTES.md); dm-acme is installed with
    # --no-deps because its metadata pins launchpad/reverb versions that do not work together.
    install_requires=[
        'dm-acme==0.4.0', 'dm-launchpad', 'dm-reverb', 'jax', 'jaxlib', 'dm-haiku', 'optax',
        'rlax', 'dm-env', 'gym', 'gymnasium', 'gym-sokoban', 'tensorflow-cpu', 'tensorflow-datasets', 'rlds',
        'absl-py', 'numpy', 'pillow', 'imageio', 'matplotlib', 'tqdm', 'psutil',
    ],
    # sb3: Stable-Baselines3 agents behind our RAE/RAC wrappers (experiments.sb3_shield); torch is
    # large, so the base install leaves it out (`make setup-sb3`).
    extras_require={'test': ['pytest'],
                    'sb3': ['stable-baselines3==2.4.1', 'sb3-contrib==2.4.0', 'torch==2.5.1']},
)
