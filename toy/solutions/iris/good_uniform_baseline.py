import os

import pandas as pd

sample = pd.read_csv(os.path.join(os.environ["DATA_DIR"], "sample_submission.csv"))
sample.to_csv(os.environ["SUBMISSION_PATH"], index=False)
