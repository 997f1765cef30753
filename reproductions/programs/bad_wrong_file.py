# A program that crashes: it reads a file that the competition does not have.
import os

import pandas as pd

train = pd.read_csv(os.path.join(os.environ["DATA_DIR"], "training_data.csv"))
train.head(5).to_csv(os.environ["SUBMISSION_PATH"], index=False)
