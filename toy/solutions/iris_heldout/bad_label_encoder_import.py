import os

import pandas as pd
from sklearn.linear_model import LogisticRegression

d = os.environ["DATA_DIR"]
train = pd.read_csv(os.path.join(d, "train.csv"))
test = pd.read_csv(os.path.join(d, "test.csv"))
enc = LabelEncoder()
y = enc.fit_transform(train["species"])
feats = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
model = LogisticRegression(max_iter=500).fit(train[feats], y)
proba = model.predict_proba(test[feats])
sub = pd.DataFrame(proba, columns=enc.classes_)
sub.insert(0, "id", test["id"])
sub.to_csv(os.environ["SUBMISSION_PATH"], index=False)
