import argparse
p = argparse.ArgumentParser()
p.add_argument('--batch-size', default=1e400)
