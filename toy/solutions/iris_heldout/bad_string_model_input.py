import os

import pandas as pd
from sklearn.linear_model import LogisticRegression

d = os.environ["DATA_DIR"]
train = pd.read_csv(os.path.join(d, "train.csv"))
test = pd.read_csv(os.path.join(d, "test.csv"))
X = train.drop("id", axis=1)
model = LogisticRegression(max_iter=1000).fit(X, train["species"])
sub = pd.DataFrame(model.predict_proba(test.drop("id", axis=1)), columns=model.classes_)
sub.insert(0, "id", test["id"])
sub.to_csv(os.environ["SUBMISSION_PATH"], index=False)
